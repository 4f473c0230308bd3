// libxml2 (the feed and page providers' XML and HTML parser, and HTML mail's text), loaded at
// first use: the binary does not link it (no DT_NEEDED), so a run without a feed, page or
// mail source never maps it. Its headers (include/libxml, a link to libxml2-dev's) give the
// types, struct fields and constants; its functions are called through the tidings_ wrappers
// below, valid once tidings_xml_load() has returned NULL. Only TidingsProviders imports this.
//
// Debian builds libxml2 with ICU, and encoding.h then includes ICU's headers, whose
// UErrorCode clashes with Foundation's own copy of ICU (_FoundationICU). Only the last two
// fields of xmlCharEncodingHandler depend on it; tidings never touches that struct by value.
#pragma once
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/HTMLparser.h>
#include <libxml/xpath.h>
#include <libxml/entities.h>
#include <libxml/xmlerror.h>

/// Loads libxml2.so.2 and initializes its parser, once per process: NULL, or why not (the
/// soname and the Debian package to install). Thread-safe; later calls return the same answer.
const char *tidings_xml_load(void);

/// Silences libxml2's error printers (per thread: call on the thread that parses, before parsing;
/// their callbacks are C variadics Swift cannot write).
void tidings_xml_quiet(void);

/// Makes an XPath evaluation running on another thread stop at its next operation (its
/// limit drops to one operation, which any count past the first exceeds): how a poll's
/// timeout ends an evaluation. libxml2 reads the limit at every operation and never writes it.
static inline void tidings_xpath_stop(xmlXPathContextPtr ctx) {
    __atomic_store_n(&ctx->opLimit, 1UL, __ATOMIC_RELAXED);
}

// libxml2's functions that tidings calls, each as libxml2 declares it.
xmlParserCtxtPtr tidings_xmlNewParserCtxt(void);
void tidings_xmlFreeParserCtxt(xmlParserCtxtPtr ctxt);
xmlDocPtr tidings_xmlCtxtReadMemory(xmlParserCtxtPtr ctxt, const char *buffer, int size, const char *URL,
                                    const char *encoding, int options);
htmlDocPtr tidings_htmlReadMemory(const char *buffer, int size, const char *URL, const char *encoding, int options);
const htmlEntityDesc *tidings_htmlEntityLookup(const xmlChar *name);
xmlNodePtr tidings_xmlDocGetRootElement(const xmlDoc *doc);
void tidings_xmlFreeDoc(xmlDocPtr cur);
xmlErrorPtr tidings_xmlGetLastError(void);
void tidings_xmlResetLastError(void);
xmlXPathCompExprPtr tidings_xmlXPathCompile(const xmlChar *str);
void tidings_xmlXPathFreeCompExpr(xmlXPathCompExprPtr comp);
xmlXPathContextPtr tidings_xmlXPathNewContext(xmlDocPtr doc);
void tidings_xmlXPathFreeContext(xmlXPathContextPtr ctxt);
xmlXPathObjectPtr tidings_xmlXPathEvalExpression(const xmlChar *str, xmlXPathContextPtr ctxt);
void tidings_xmlXPathFreeObject(xmlXPathObjectPtr obj);
xmlErrorPtr tidings_xmlCtxtGetLastError(void *ctx);
long tidings_xmlGetLineNo(const xmlNode *node);
xmlChar *tidings_xmlGetProp(const xmlNode *node, const xmlChar *name);
/// libxml2's `xmlFree`, for what it returned (xmlGetProp's strings).
void tidings_xml_free(void *p);
