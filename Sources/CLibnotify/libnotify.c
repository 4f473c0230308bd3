#include "CLibnotify.h"

#include "CDynamicLoad.h"
#include <pthread.h>
#include <stdio.h>

#define GIO_FUNCTIONS(X)                                                                                          \
    X(g_bus_get_sync) X(g_dbus_connection_call_sync) X(g_dbus_connection_set_exit_on_close)                     \
    X(g_dbus_connection_signal_subscribe) X(g_dbus_connection_is_closed) X(g_error_free) X(g_free)              \
    X(g_list_free_full) X(g_main_context_iteration) X(g_main_context_new) X(g_main_context_push_thread_default) \
    X(g_main_context_wakeup) X(g_object_unref) X(g_signal_connect_data) X(g_spawn_async)                        \
    X(g_variant_get_boolean) X(g_variant_get_child_value) X(g_variant_get_string) X(g_variant_get_type_string)  \
    X(g_variant_get_uint32) X(g_variant_lookup_value) X(g_variant_new_string) X(g_variant_new_tuple)            \
    X(g_variant_unref)
#define NOTIFY_FUNCTIONS(X)                                                                                 \
    X(notify_get_server_caps) X(notify_init) X(notify_is_initted) X(notify_uninit)                        \
    X(notify_notification_new) X(notify_notification_add_action) X(notify_notification_set_app_name)      \
    X(notify_notification_set_category) X(notify_notification_set_hint) X(notify_notification_set_timeout) \
    X(notify_notification_set_urgency) X(notify_notification_show)

#define ALL_FUNCTIONS(X) GIO_FUNCTIONS(X) NOTIFY_FUNCTIONS(X)
TIDINGS_DL_TABLE(ALL_FUNCTIONS)
/// The GIO functions come first, then libnotify's.
enum { gio_count = slot_g_variant_unref + 1 };

static pthread_once_t gio_once = PTHREAD_ONCE_INIT, notify_once = PTHREAD_ONCE_INIT;
static char gio_error[512], notify_error[512];
static int gio_failed, notify_failed;

// libgio-2.0.so.0 needs libgobject and libglib: dlsym on its handle finds their functions too.
static void load_gio(void) {
    gio_failed = tidings_dl_load("libgio-2.0.so.0", "libglib2.0-0", names, slots, gio_count, gio_error, sizeof gio_error);
}
static void load_notify(void) {
    const char *gio = tidings_gio_load();
    if (gio) {
        notify_failed = 1;
        snprintf(notify_error, sizeof notify_error, "%s", gio);
        return;
    }
    notify_failed = tidings_dl_load("libnotify.so.4", "libnotify4", names + gio_count, slots + gio_count,
                                    slot_count - gio_count, notify_error, sizeof notify_error);
}

const char *tidings_gio_load(void) {
    pthread_once(&gio_once, load_gio);
    return gio_failed ? gio_error : NULL;
}
const char *tidings_notify_load(void) {
    pthread_once(&notify_once, load_notify);
    return notify_failed ? notify_error : NULL;
}

// Each wrapper has exactly its library function's type (checked here), and forwards.
GIO_FUNCTIONS(TIDINGS_DL_SAME_TYPE)
NOTIFY_FUNCTIONS(TIDINGS_DL_SAME_TYPE)

GDBusConnection *tidings_g_bus_get_sync(GBusType bus_type, GCancellable *cancellable, GError **error) {
    return CALL(g_bus_get_sync)(bus_type, cancellable, error);
}
GVariant *tidings_g_dbus_connection_call_sync(GDBusConnection *connection, const gchar *bus_name,
                                              const gchar *object_path, const gchar *interface_name,
                                              const gchar *method_name, GVariant *parameters,
                                              const GVariantType *reply_type, GDBusCallFlags flags, gint timeout_msec,
                                              GCancellable *cancellable, GError **error) {
    return CALL(g_dbus_connection_call_sync)(connection, bus_name, object_path, interface_name, method_name,
                                             parameters, reply_type, flags, timeout_msec, cancellable, error);
}
void tidings_g_dbus_connection_set_exit_on_close(GDBusConnection *connection, gboolean exit_on_close) {
    CALL(g_dbus_connection_set_exit_on_close)(connection, exit_on_close);
}
guint tidings_g_dbus_connection_signal_subscribe(GDBusConnection *connection, const gchar *sender,
                                                 const gchar *interface_name, const gchar *member,
                                                 const gchar *object_path, const gchar *arg0, GDBusSignalFlags flags,
                                                 GDBusSignalCallback callback, gpointer user_data,
                                                 GDestroyNotify user_data_free_func) {
    return CALL(g_dbus_connection_signal_subscribe)(connection, sender, interface_name, member, object_path, arg0,
                                                    flags, callback, user_data, user_data_free_func);
}
gboolean tidings_g_dbus_connection_is_closed(GDBusConnection *connection) {
    return CALL(g_dbus_connection_is_closed)(connection);
}
void tidings_g_error_free(GError *error) { CALL(g_error_free)(error); }
void tidings_g_free(gpointer mem) { CALL(g_free)(mem); }
void tidings_g_list_free_full(GList *list, GDestroyNotify free_func) { CALL(g_list_free_full)(list, free_func); }
gboolean tidings_g_main_context_iteration(GMainContext *context, gboolean may_block) {
    return CALL(g_main_context_iteration)(context, may_block);
}
GMainContext *tidings_g_main_context_new(void) { return CALL(g_main_context_new)(); }
void tidings_g_main_context_push_thread_default(GMainContext *context) {
    CALL(g_main_context_push_thread_default)(context);
}
void tidings_g_main_context_wakeup(GMainContext *context) { CALL(g_main_context_wakeup)(context); }
void tidings_g_object_unref(gpointer object) { CALL(g_object_unref)(object); }
gulong tidings_g_signal_connect_data(gpointer instance, const gchar *detailed_signal, GCallback c_handler,
                                     gpointer data, GClosureNotify destroy_data, GConnectFlags connect_flags) {
    return CALL(g_signal_connect_data)(instance, detailed_signal, c_handler, data, destroy_data, connect_flags);
}
gboolean tidings_g_spawn_async(const gchar *working_directory, gchar **argv, gchar **envp, GSpawnFlags flags,
                               GSpawnChildSetupFunc child_setup, gpointer user_data, GPid *child_pid, GError **error) {
    return CALL(g_spawn_async)(working_directory, argv, envp, flags, child_setup, user_data, child_pid, error);
}
gboolean tidings_g_variant_get_boolean(GVariant *value) { return CALL(g_variant_get_boolean)(value); }
GVariant *tidings_g_variant_get_child_value(GVariant *value, gsize index_) {
    return CALL(g_variant_get_child_value)(value, index_);
}
const gchar *tidings_g_variant_get_string(GVariant *value, gsize *length) {
    return CALL(g_variant_get_string)(value, length);
}
const gchar *tidings_g_variant_get_type_string(GVariant *value) { return CALL(g_variant_get_type_string)(value); }
guint32 tidings_g_variant_get_uint32(GVariant *value) { return CALL(g_variant_get_uint32)(value); }
GVariant *tidings_g_variant_lookup_value(GVariant *dictionary, const gchar *key, const GVariantType *expected_type) {
    return CALL(g_variant_lookup_value)(dictionary, key, expected_type);
}
GVariant *tidings_g_variant_new_string(const gchar *string) { return CALL(g_variant_new_string)(string); }
GVariant *tidings_g_variant_new_tuple(GVariant *const *children, gsize n_children) {
    return CALL(g_variant_new_tuple)(children, n_children);
}
void tidings_g_variant_unref(GVariant *value) { CALL(g_variant_unref)(value); }

GList *tidings_notify_get_server_caps(void) { return CALL(notify_get_server_caps)(); }
gboolean tidings_notify_init(const char *app_name) { return CALL(notify_init)(app_name); }
gboolean tidings_notify_is_initted(void) { return CALL(notify_is_initted)(); }
void tidings_notify_uninit(void) { CALL(notify_uninit)(); }
NotifyNotification *tidings_notify_notification_new(const char *summary, const char *body, const char *icon) {
    return CALL(notify_notification_new)(summary, body, icon);
}
void tidings_notify_notification_add_action(NotifyNotification *notification, const char *action, const char *label,
                                            NotifyActionCallback callback, gpointer user_data, GFreeFunc free_func) {
    CALL(notify_notification_add_action)(notification, action, label, callback, user_data, free_func);
}
void tidings_notify_notification_set_app_name(NotifyNotification *notification, const char *app_name) {
    CALL(notify_notification_set_app_name)(notification, app_name);
}
void tidings_notify_notification_set_category(NotifyNotification *notification, const char *category) {
    CALL(notify_notification_set_category)(notification, category);
}
void tidings_notify_notification_set_hint(NotifyNotification *notification, const char *key, GVariant *value) {
    CALL(notify_notification_set_hint)(notification, key, value);
}
void tidings_notify_notification_set_timeout(NotifyNotification *notification, gint timeout) {
    CALL(notify_notification_set_timeout)(notification, timeout);
}
void tidings_notify_notification_set_urgency(NotifyNotification *notification, NotifyUrgency urgency) {
    CALL(notify_notification_set_urgency)(notification, urgency);
}
gboolean tidings_notify_notification_show(NotifyNotification *notification, GError **error) {
    return CALL(notify_notification_show)(notification, error);
}
