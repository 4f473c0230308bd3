// libyaml (Debian's libyaml-0-2): the event parser `tidings import urlwatch` reads urls.yaml
// with. Only TidingsYAML imports this module.
#include <yaml.h>
