import Glibc

/// Runs `body` on a new detached POSIX thread named `name` (cut to the 15 bytes Linux keeps),
/// with the default attributes' stack size, as Foundation's `Thread` did without the corelibs
/// runtime. False if the thread could not be created (`pthread_create` failed; `body` never runs).
@discardableResult
package func startDetachedThread(name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
    let start = Unmanaged.passRetained(ThreadStart(name: name, body: body))
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let started = pthread_create(&thread, &attributes, { raw in
        let start = Unmanaged<ThreadStart>.fromOpaque(raw!).takeRetainedValue()
        nameThisThread(start.name)
        start.body()
        return nil
    }, start.toOpaque())
    guard started == 0 else {
        start.release()
        return false
    }
    return true
}

/// What `pthread_setname_np` does (Swift's Glibc module does not show that GNU extension):
/// the name, cut to 15 bytes, written to this thread's `comm`. A failure leaves it unnamed.
private func nameThisThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

private final class ThreadStart {
    let name: String
    let body: @Sendable () -> Void
    init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}
