#include "CYAML.h"

#include "CDynamicLoad.h"
#include <pthread.h>

// Every libyaml function called, resolved by name when the library is loaded.
#define TIDINGS_YAML_FUNCTIONS(X)                                                                   \
    X(yaml_parser_initialize) X(yaml_parser_delete) X(yaml_parser_set_input_string)                 \
    X(yaml_parser_parse) X(yaml_event_delete)

TIDINGS_DL_TABLE(TIDINGS_YAML_FUNCTIONS)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char error[512];
static int failed;

static void load(void) {
    failed = tidings_dl_load("libyaml-0.so.2", "libyaml-0-2", names, slots, slot_count, error, sizeof error);
}

const char *tidings_yaml_load(void) {
    pthread_once(&once, load);
    return failed ? error : NULL;
}

// Each wrapper has exactly its libyaml function's type (checked here), and forwards.
TIDINGS_YAML_FUNCTIONS(TIDINGS_DL_SAME_TYPE)

int tidings_yaml_parser_initialize(yaml_parser_t *parser) { return CALL(yaml_parser_initialize)(parser); }
void tidings_yaml_parser_delete(yaml_parser_t *parser) { CALL(yaml_parser_delete)(parser); }
void tidings_yaml_parser_set_input_string(yaml_parser_t *parser, const unsigned char *input, size_t size) {
    CALL(yaml_parser_set_input_string)(parser, input, size);
}
int tidings_yaml_parser_parse(yaml_parser_t *parser, yaml_event_t *event) { return CALL(yaml_parser_parse)(parser, event); }
void tidings_yaml_event_delete(yaml_event_t *event) { CALL(yaml_event_delete)(event); }
