// libxml2 (the feed provider's XML parser and HTML-fragment reducer), plus a way to silence
// its process-wide error printers, whose callbacks are C variadics Swift cannot write.
// Debian builds libxml2 with ICU, and encoding.h then includes ICU's headers, whose
// UErrorCode clashes with Foundation's own copy of ICU (_FoundationICU). Only the last two
// fields of xmlCharEncodingHandler depend on it; tidings never touches that struct by value.
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/HTMLparser.h>
#include <libxml/xpath.h>
#include <libxml/entities.h>

static void tidings_xml_generic_noop(void *ctx, const char *msg, ...) { (void)ctx; (void)msg; }
static void tidings_xml_structured_noop(void *ctx, xmlErrorPtr error) { (void)ctx; (void)error; }

/// libxml2 keeps its error handlers per thread: call on the thread that parses, before parsing.
static inline void tidings_xml_quiet(void) {
    xmlSetGenericErrorFunc(NULL, tidings_xml_generic_noop);
    xmlSetStructuredErrorFunc(NULL, tidings_xml_structured_noop);
}

/// `xmlFree` is a global function pointer (a macro in some builds): one call Swift can always make.
static inline void tidings_xml_free(void *p) { xmlFree(p); }

/// Makes an XPath evaluation running on another thread stop at its next operation (its
/// limit drops to one operation, which any count past the first exceeds): how a poll's
/// timeout ends an evaluation. libxml2 reads the limit at every operation and never writes it.
static inline void tidings_xpath_stop(xmlXPathContextPtr ctx) {
    __atomic_store_n(&ctx->opLimit, 1UL, __ATOMIC_RELAXED);
}
