#include "CLibXML2.h"

#include "CDynamicLoad.h"
#include <pthread.h>

// Every libxml2 function called, resolved by name when the library is loaded.
#define TIDINGS_XML_FUNCTIONS(X)                                                                  \
    X(xmlInitParser) X(xmlSetGenericErrorFunc) X(xmlSetStructuredErrorFunc) X(xmlNewParserCtxt) \
    X(xmlFreeParserCtxt) X(xmlCtxtReadMemory) X(htmlReadMemory) X(htmlEntityLookup)              \
    X(xmlDocGetRootElement) X(xmlFreeDoc) X(xmlGetLastError) X(xmlResetLastError)                \
    X(xmlXPathCompile) X(xmlXPathFreeCompExpr) X(xmlXPathNewContext) X(xmlXPathFreeContext)      \
    X(xmlXPathEvalExpression) X(xmlXPathFreeObject) X(xmlCtxtGetLastError) X(xmlGetLineNo)       \
    X(xmlGetProp) X(xmlFree)

TIDINGS_DL_TABLE(TIDINGS_XML_FUNCTIONS)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char error[512];
static int failed;

static void load(void) {
    failed = tidings_dl_load("libxml2.so.2", "libxml2", names, slots, slot_count, error, sizeof error);
    if (!failed) CALL(xmlInitParser)();
}

const char *tidings_xml_load(void) {
    pthread_once(&once, load);
    return failed ? error : NULL;
}

static void generic_noop(void *ctx, const char *msg, ...) { (void)ctx; (void)msg; }
static void structured_noop(void *ctx, xmlErrorPtr error) { (void)ctx; (void)error; }

void tidings_xml_quiet(void) {
    CALL(xmlSetGenericErrorFunc)(NULL, generic_noop);
    CALL(xmlSetStructuredErrorFunc)(NULL, structured_noop);
}

// Each wrapper has exactly its libxml2 function's type (checked here), and forwards.
TIDINGS_DL_SAME_TYPE(xmlNewParserCtxt)
TIDINGS_DL_SAME_TYPE(xmlFreeParserCtxt)
TIDINGS_DL_SAME_TYPE(xmlCtxtReadMemory)
TIDINGS_DL_SAME_TYPE(htmlReadMemory)
TIDINGS_DL_SAME_TYPE(htmlEntityLookup)
TIDINGS_DL_SAME_TYPE(xmlDocGetRootElement)
TIDINGS_DL_SAME_TYPE(xmlFreeDoc)
TIDINGS_DL_SAME_TYPE(xmlGetLastError)
TIDINGS_DL_SAME_TYPE(xmlResetLastError)
TIDINGS_DL_SAME_TYPE(xmlXPathCompile)
TIDINGS_DL_SAME_TYPE(xmlXPathFreeCompExpr)
TIDINGS_DL_SAME_TYPE(xmlXPathNewContext)
TIDINGS_DL_SAME_TYPE(xmlXPathFreeContext)
TIDINGS_DL_SAME_TYPE(xmlXPathEvalExpression)
TIDINGS_DL_SAME_TYPE(xmlXPathFreeObject)
TIDINGS_DL_SAME_TYPE(xmlCtxtGetLastError)
TIDINGS_DL_SAME_TYPE(xmlGetLineNo)
TIDINGS_DL_SAME_TYPE(xmlGetProp)

xmlParserCtxtPtr tidings_xmlNewParserCtxt(void) { return CALL(xmlNewParserCtxt)(); }
void tidings_xmlFreeParserCtxt(xmlParserCtxtPtr ctxt) { CALL(xmlFreeParserCtxt)(ctxt); }
xmlDocPtr tidings_xmlCtxtReadMemory(xmlParserCtxtPtr ctxt, const char *buffer, int size, const char *URL,
                                    const char *encoding, int options) {
    return CALL(xmlCtxtReadMemory)(ctxt, buffer, size, URL, encoding, options);
}
htmlDocPtr tidings_htmlReadMemory(const char *buffer, int size, const char *URL, const char *encoding, int options) {
    return CALL(htmlReadMemory)(buffer, size, URL, encoding, options);
}
const htmlEntityDesc *tidings_htmlEntityLookup(const xmlChar *name) { return CALL(htmlEntityLookup)(name); }
xmlNodePtr tidings_xmlDocGetRootElement(const xmlDoc *doc) { return CALL(xmlDocGetRootElement)(doc); }
void tidings_xmlFreeDoc(xmlDocPtr cur) { CALL(xmlFreeDoc)(cur); }
xmlErrorPtr tidings_xmlGetLastError(void) { return CALL(xmlGetLastError)(); }
void tidings_xmlResetLastError(void) { CALL(xmlResetLastError)(); }
xmlXPathCompExprPtr tidings_xmlXPathCompile(const xmlChar *str) { return CALL(xmlXPathCompile)(str); }
void tidings_xmlXPathFreeCompExpr(xmlXPathCompExprPtr comp) { CALL(xmlXPathFreeCompExpr)(comp); }
xmlXPathContextPtr tidings_xmlXPathNewContext(xmlDocPtr doc) { return CALL(xmlXPathNewContext)(doc); }
void tidings_xmlXPathFreeContext(xmlXPathContextPtr ctxt) { CALL(xmlXPathFreeContext)(ctxt); }
xmlXPathObjectPtr tidings_xmlXPathEvalExpression(const xmlChar *str, xmlXPathContextPtr ctxt) {
    return CALL(xmlXPathEvalExpression)(str, ctxt);
}
void tidings_xmlXPathFreeObject(xmlXPathObjectPtr obj) { CALL(xmlXPathFreeObject)(obj); }
xmlErrorPtr tidings_xmlCtxtGetLastError(void *ctx) { return CALL(xmlCtxtGetLastError)(ctx); }
long tidings_xmlGetLineNo(const xmlNode *node) { return CALL(xmlGetLineNo)(node); }
xmlChar *tidings_xmlGetProp(const xmlNode *node, const xmlChar *name) { return CALL(xmlGetProp)(node, name); }
// `xmlFree` is a global function pointer (a variable): its slot holds the variable's address.
void tidings_xml_free(void *p) { (*CALL(xmlFree))(p); }
