import CCurl
import FoundationEssentials
import Glibc
import Synchronization
import TidingsPluginAPI

/// One thread driving every transfer of a ``CurlHTTPClient`` (HTTP requests and SMTP submissions,
/// each a ``CurlJob``) through one libcurl multi handle (connection cache, DNS cache, per-host limit).
///
/// Other threads only append commands to a mutex-protected inbox and call `curl_multi_wakeup`,
/// the one multi-handle call libcurl allows from another thread. Adding and removing easy
/// handles, `curl_multi_perform`, the transfer callbacks and resuming the waiting tasks all
/// happen on the loop thread. The thread starts with the first request and ends after ``stop()``.
final class CurlMultiLoop: @unchecked Sendable {
    private enum Command: Sendable {
        case add(any CurlJob)
        case cancel(any CurlJob)
        case limitPerHost(Int)
        /// Work on the loop thread, between two rounds of `curl_multi_perform`.
        case call(@Sendable () -> Void)
    }

    private struct Inbox {
        var commands: [Command] = []
        var started = false
        var stopping = false
        /// The `CURLM *`, made with the first job (libcurl is loaded then: DESIGN §15, so a
        /// command that makes no request never maps it); freed in deinit, after the thread
        /// (which holds `self`) has ended.
        var multi: UnsafeMutableRawPointer?
        /// Why libcurl could not be loaded (its soname and the Debian package to install).
        var unavailable: String?
        var maxConnectionsPerHost: Int
        let maxCachedConnections: Int

        /// The multi handle, made (libcurl loaded) on first call; nil if libcurl cannot be loaded.
        mutating func open() -> UnsafeMutableRawPointer? {
            if let multi { return multi }
            guard unavailable == nil else { return nil }
            if let missing = tidings_curl_load() {
                unavailable = String(cString: missing)
                return nil
            }
            guard let made = tidings_curl_multi_init() else {
                unavailable = "libcurl: cannot create a multi handle"
                return nil
            }
            tidings_curl_multi_setopt_long(made, CURLMOPT_MAX_HOST_CONNECTIONS, max(0, maxConnectionsPerHost))
            tidings_curl_multi_setopt_long(made, CURLMOPT_MAXCONNECTS, maxCachedConnections)
            multi = made
            return made
        }
    }

    private let inbox: Mutex<Inbox>
    /// Reset easy handles kept for reuse, at most this many.
    private static let poolLimit = 64

    init(maxConnectionsPerHost: Int, maxCachedConnections: Int = 256) {
        inbox = Mutex(Inbox(maxConnectionsPerHost: maxConnectionsPerHost, maxCachedConnections: maxCachedConnections))
    }

    deinit { if let multi = inbox.withLock({ $0.multi }) { tidings_curl_multi_cleanup(multi) } }

    /// Why a job cannot run: libcurl could not be loaded, or the loop is stopping.
    private func refusal() -> any Error {
        inbox.withLock { $0.unavailable }.map { HTTPClientError.transport($0) } ?? CancellationError()
    }

    /// Runs `job` on the loop and waits for its outcome; task cancellation aborts it.
    func run<Job: CurlJob>(_ job: Job) async throws -> Job.Output {
        try Task.checkCancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Job.Output, Error>) in
                job.continuation = c
                submit(job)
            }
        } onCancel: {
            cancel(job)
        }
    }

    /// Runs `body` on the loop thread and returns its result: the one place where the easy handle
    /// of a finished job that ``CurlJob/keepsConnection`` may be used (`curl_easy_send`/`recv`),
    /// as the multi handle it still belongs to is touched nowhere else. The loop does nothing else
    /// meanwhile: `body` bounds its own time.
    func onLoop<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, Error>) in
            if !enqueue(.call({ c.resume(with: Result { try body() }) })) { c.resume(throwing: refusal()) }
        }
    }

    /// Hands a job to the loop; it completes the job's continuation.
    private func submit(_ transfer: any CurlJob) {
        if !enqueue(.add(transfer)) { transfer.fail(refusal()) }
    }

    /// Queues `command` for the loop (making the multi handle and starting its thread the first
    /// time); false once the loop is stopping, or if libcurl cannot be loaded.
    private func enqueue(_ command: Command) -> Bool {
        let accepted = inbox.withLock { inbox -> UnsafeMutableRawPointer? in
            guard !inbox.stopping, let multi = inbox.open() else { return nil }
            inbox.commands.append(command)
            if !inbox.started {
                inbox.started = true
                startDetachedThread(name: "tidings-curl") { [self] in run() }
            }
            return multi
        }
        if let accepted { tidings_curl_multi_wakeup(accepted) }
        return accepted != nil
    }

    /// Cancels a job (from any thread): the loop drops it and it fails with `CancellationError`.
    private func cancel(_ transfer: any CurlJob) {
        transfer.markCancelled()
        let queued = inbox.withLock { inbox -> UnsafeMutableRawPointer? in
            guard !inbox.stopping, let multi = inbox.multi else { return nil }
            inbox.commands.append(.cancel(transfer))
            return multi
        }
        if let queued { tidings_curl_multi_wakeup(queued) }
    }

    /// Changes the per-host connection limit (a reload's `max_per_host`) for transfers from now on.
    func limitPerHost(_ n: Int) {
        let queued = inbox.withLock { inbox -> UnsafeMutableRawPointer? in
            guard inbox.started, let multi = inbox.multi else {
                // No thread yet: a multi handle to come is made with this limit, one made by
                // ``prepare()`` takes it now (nothing else touches it before the thread starts).
                inbox.maxConnectionsPerHost = n
                if let prepared = inbox.multi { tidings_curl_multi_setopt_long(prepared, CURLMOPT_MAX_HOST_CONNECTIONS, max(0, n)) }
                return nil
            }
            inbox.commands.append(.limitPerHost(n))
            return multi
        }
        if let queued { tidings_curl_multi_wakeup(queued) }
    }

    /// Loads libcurl and makes the multi handle now instead of with the first job: the libraries
    /// libcurl needs are mapped, relocated and initialised (OpenSSL's configuration, GnuTLS's
    /// implicit init), so that a caller can then release their start-up pages (issue 31's
    /// `check`). Nothing is started: the loop thread comes with the first job.
    func prepare() { _ = inbox.withLock { $0.open() } }

    /// Ends the thread; transfers still running fail with `CancellationError`.
    package func stop() {
        let started = inbox.withLock { inbox -> UnsafeMutableRawPointer? in
            inbox.stopping = true
            return inbox.started ? inbox.multi : nil
        }
        if let started { tidings_curl_multi_wakeup(started) }
    }

    /// The loop thread (started once the multi handle is made).
    private func run() {
        guard let multi = inbox.withLock({ $0.multi }) else { return }
        var active: [UnsafeMutableRawPointer: any CurlJob] = [:]
        var idle: [UnsafeMutableRawPointer] = []
        /// Handles of finished jobs that keep their connection: still in the multi handle (so
        /// `curl_easy_send`/`recv` find the connection), until the loop stops; with their jobs,
        /// which own what the handle points to (its error buffer, its callback's data).
        var held: [(handle: UnsafeMutableRawPointer, job: any CurlJob)] = []
        var batch: [Command] = []

        func retire(_ handle: UnsafeMutableRawPointer) {
            tidings_curl_multi_remove_handle(multi, handle)
            tidings_curl_easy_reset(handle)
            active[handle] = nil
            if idle.count < Self.poolLimit { idle.append(handle) } else { tidings_curl_easy_cleanup(handle) }
        }

        while true {
            let stopping = inbox.withLock { inbox -> Bool in
                swap(&batch, &inbox.commands)
                return inbox.stopping
            }
            for command in batch {
                switch command {
                case .add(let transfer):
                    if transfer.isCancelled {
                        transfer.fail(CancellationError())
                        continue
                    }
                    guard let handle = idle.popLast() ?? tidings_curl_easy_init() else {
                        transfer.fail(HTTPClientError.transport("libcurl: cannot create a transfer"))
                        continue
                    }
                    transfer.configure(handle)
                    active[handle] = transfer
                    let code = tidings_curl_multi_add_handle(multi, handle)
                    if code != CURLM_OK {
                        retire(handle)
                        transfer.fail(HTTPClientError.transport("libcurl: \(String(cString: tidings_curl_multi_strerror(code)))"))
                    }
                case .cancel(let transfer):
                    // The handle may already serve another transfer: only the one it belongs to is cancelled.
                    guard let handle = transfer.handle, active[handle] === transfer else { continue }
                    retire(handle)
                    transfer.fail(CancellationError())
                case .limitPerHost(let n):
                    tidings_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(0, n))
                case .call(let body):
                    body()
                }
            }
            batch.removeAll(keepingCapacity: true)

            if stopping {
                for (handle, transfer) in active {
                    retire(handle)
                    transfer.fail(CancellationError())
                }
                for handle in idle { tidings_curl_easy_cleanup(handle) }
                // Removing a CONNECT_ONLY handle closes its connection.
                for (handle, _) in held {
                    tidings_curl_multi_remove_handle(multi, handle)
                    tidings_curl_easy_cleanup(handle)
                }
                held.removeAll()
                return
            }

            var running: Int32 = 0
            tidings_curl_multi_perform(multi, &running)
            var left: Int32 = 0
            while let message = tidings_curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                    let transfer = active[handle]
                else { continue }
                let code = message.pointee.data.result
                transfer.finish(code) {
                    if transfer.keepsConnection && code == CURLE_OK {
                        active[handle] = nil
                        held.append((handle, transfer))
                    } else {
                        retire(handle)
                    }
                }
            }
            // Sleeps until a socket is ready, libcurl's next timeout, or a wakeup from submit/cancel/stop.
            tidings_curl_multi_poll(multi, nil, 0, active.isEmpty ? 10_000 : 1_000, nil)
        }
    }
}
