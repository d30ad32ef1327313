public import FeedDomain

#if HTTP
    public import Foundation
    internal import Synchronization
    #if canImport(FoundationNetworking)
        internal import FoundationNetworking
    #endif

    /// A replica's transport to a `feedsync serve` (or any server mounting ``SyncEndpoint`` on `/api/sync/push` and
    /// `/api/sync/pull`), acting as the user of a bearer token.
    ///
    /// Failures that may pass — no connection, a timeout, a 5xx answer — are ``SyncError/unavailable(_:)``, so
    /// ``ReplicaSync`` retries them; 401 is ``SyncError/unauthorized``, and the server's other JSON errors map to their
    /// ``SyncError`` cases. ``waitForChanges(after:timeout:)`` listens on the server's event stream
    /// (`/api/events?after=SEQ`) until the first event or the timeout, and throws ``SyncError/unauthorized`` when the
    /// stream refuses the token. The token is sent in the `Authorization` header only (the event stream's request
    /// included), and never appears in an error.
    public final class HTTPSyncTransport: SyncTransport {
        /// The server's base URL, such as `http://127.0.0.1:8080/`.
        public let baseURL: URL
        private let token: String
        private let session: URLSession

        /// A transport to the server at `baseURL` with `token`; `timeout` bounds each request.
        public init(baseURL: URL, token: String, timeout: Duration = .seconds(30)) {
            self.baseURL = baseURL
            self.token = token
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = Double(timeout.components.seconds)
            configuration.httpMaximumConnectionsPerHost = 2
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            session = URLSession(configuration: configuration)
        }

        deinit {
            session.invalidateAndCancel()
        }

        public func push(_ request: PushRequest) async throws(SyncError) -> PushResponse {
            try await post("api/sync/push", request, answer: PushResponse.self)
        }

        public func pull(_ request: PullRequest) async throws(SyncError) -> PullResponse {
            try await post("api/sync/pull", request, answer: PullResponse.self)
        }

        public func waitForChanges(after seq: Int64, timeout: Duration) async throws(SyncError) {
            var components = URLComponents(url: baseURL.appendingPathComponent("api/events"), resolvingAgainstBaseURL: false)
            components?.queryItems = [URLQueryItem(name: "after", value: String(seq))]
            guard let url = components?.url else { throw .invalidRequest("the server URL cannot take a path") }
            var request = URLRequest(url: url)
            request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
            request.setValue("Bearer " + token, forHTTPHeaderField: "Authorization")
            request.timeoutInterval = Double(timeout.components.seconds) + 1
            let listener = FirstEventListener()
            // A session of its own, with the listener as its delegate: the stream's bytes reach it as they arrive.
            let streaming = URLSession(configuration: .ephemeral, delegate: listener, delegateQueue: nil)
            defer { streaming.invalidateAndCancel() }
            let task = streaming.dataTask(with: request)
            task.resume()
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    await withTaskCancellationHandler {
                        await listener.firstEvent()
                    } onCancel: {
                        listener.finish()
                    }
                }
                group.addTask { try? await Task.sleep(for: timeout) }
                await group.next()
                group.cancelAll()
            }
            task.cancel()
            listener.finish()
            // A refused token ends the wait at once: say so, rather than as if changes had come.
            if (task.response as? HTTPURLResponse)?.statusCode == 401 { throw .unauthorized }
        }

        // MARK: - Requests

        private func post<Message: Encodable, Answer: Decodable>(
            _ path: String, _ message: Message, answer: Answer.Type
        ) async throws(SyncError) -> Answer {
            var request = URLRequest(url: baseURL.appendingPathComponent(path))
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.setValue("Bearer " + token, forHTTPHeaderField: "Authorization")
            do {
                request.httpBody = try JSONEncoder().encode(message)
            } catch {
                throw .invalidRequest("cannot encode the request: \(error)")
            }
            let data: Data
            let response: URLResponse
            do {
                (data, response) = try await session.data(for: request)
            } catch {
                throw .unavailable(Self.describe(error, url: baseURL))
            }
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            guard status == 200 else { throw Self.error(status: status, body: data) }
            do {
                return try JSONDecoder().decode(answer, from: data)
            } catch {
                throw .invalidRequest("the server's answer is not a \(Answer.self)")
            }
        }

        /// The ``SyncError`` of a non-200 answer, from its status and JSON error body.
        static func error(status: Int, body: Data) -> SyncError {
            let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
            let message = (object?["error"] as? String).map { String($0.prefix(300)) } ?? "HTTP \(status)"
            let code = object?["code"] as? String
            switch (status, code) {
            case (401, _): return .unauthorized
            // The replica's sync names the user and the replica (the server's message names only the user).
            case (403, "accountNotFound"), (403, "unknownUser"): return .accountNotFound(userID: "", replica: nil)
            case (403, _): return .clientOfAnotherUser(clientID: message)
            case (400, "unsupportedVersion"): return .invalidRequest(message)
            case (400..<500, _): return .invalidRequest(message)
            default: return .unavailable("HTTP \(status): \(message)")
            }
        }

        /// A network error in one line, naming the server (no credentials: the token is never in a URL).
        private static func describe(_ error: any Error, url: URL) -> String {
            let reason = (error as? URLError).map { $0.localizedDescription } ?? String(describing: error)
            return "\(url.absoluteString): \(reason)"
        }
    }

    /// Watches one event-stream response for its first `data:` line. `@unchecked Sendable`: its state is behind `state`'s
    /// mutex; URLSession calls the delegate methods on its own queue.
    private final class FirstEventListener: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        private struct State {
            var seen = false
            var buffer = Data()
            var waiter: CheckedContinuation<Void, Never>?
        }

        private let state = Mutex(State())

        /// Returns once an event arrived or the stream ended.
        func firstEvent() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.seen { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }

        /// Ends the wait (the stream was cancelled or timed out).
        func finish() { signal() }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            let event = state.withLock { state -> Bool in
                state.buffer.append(data)
                if state.buffer.count > 64 << 10 { state.buffer.removeFirst(state.buffer.count - (64 << 10)) }
                return String(decoding: state.buffer, as: UTF8.self).contains("\ndata:")
                    || state.buffer.starts(with: Data("data:".utf8))
            }
            if event { signal() }
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            signal()
        }

        private func signal() {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.seen = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
#endif

/// The transport for a replica's source location.
public enum SyncTransports {
    /// `http(s)://[token:TOKEN@]HOST[:PORT]` → an `HTTPSyncTransport` with the URL's password as its token (the URL
    /// it talks to has no credentials; builds with the `HTTP` trait); anything else → an ``InProcessSyncTransport``
    /// that opens the database (which refuses an `http://` location).
    public static func transport(for source: String, userID: String, options: FeedOpenOptions = FeedOpenOptions()) -> any SyncTransport {
        #if HTTP
            let lowered = source.lowercased()
            if lowered.hasPrefix("http://") || lowered.hasPrefix("https://"), var components = URLComponents(string: source) {
                let token = components.password ?? ""
                components.user = nil
                components.password = nil
                if let url = components.url { return HTTPSyncTransport(baseURL: url, token: token) }
            }
        #endif
        return InProcessSyncTransport(location: source, userID: userID, options: options)
    }
}
