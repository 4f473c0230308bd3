// libyaml's event parser (Debian's libyaml-0-2; `tidings import urlwatch` reads urls.yaml with
// it), loaded at first use: the binary does not link it (no DT_NEEDED), so no other command maps
// it (DESIGN §15). Its header gives the types and constants; its functions are called through
// the tidings_ wrappers below, valid once tidings_yaml_load() has returned NULL. Only
// TidingsYAML imports this module.
#pragma once
#include <yaml.h>

/// Loads libyaml-0.so.2, once per process: NULL, or why not (the soname and the Debian package
/// to install). Thread-safe.
const char *tidings_yaml_load(void);

int tidings_yaml_parser_initialize(yaml_parser_t *parser);
void tidings_yaml_parser_delete(yaml_parser_t *parser);
void tidings_yaml_parser_set_input_string(yaml_parser_t *parser, const unsigned char *input, size_t size);
int tidings_yaml_parser_parse(yaml_parser_t *parser, yaml_event_t *event);
void tidings_yaml_event_delete(yaml_event_t *event);
