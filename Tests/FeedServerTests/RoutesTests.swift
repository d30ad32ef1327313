import FeedServer
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// Every route's answers over real HTTP on loopback: statuses, JSON shapes, errors, tokens and limits.
// Blocks: waits on sockets for an in-process HTTP server's answers.
@Suite(.ownThreads) struct RoutesTests {
    @Test(arguments: TestBackend.allCases)
    func readRoutesAnswerWithTheCLIShapes(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend) else { return }
        defer { sut.close() }
        let health = try sut.request("GET", "/health")
        #expect(health.status == 200)
        #expect(health.headers["content-type"] == "application/json")
        #expect(health.json["status"] as? String == "ok")
        #expect(health.json["backend"] as? String == (backend == .sqlite ? "SQLite" : "PostgreSQL"))
        #expect(health.json["lastSeq"] as? Int == 6)

        let feed = try sut.request("GET", "/api/feed?limit=2")
        #expect(feed.status == 200)
        #expect(feed.text.hasPrefix(#"{"viewer":null,"posts":[{"id":"p3","author":"carol","body":"post 3 by carol","createdAt":""#))
        let cursor = try #require(feed.json["nextCursor"] as? String)
        let next = try sut.request("GET", "/api/feed?limit=2&before=\(cursor)", token: "tok-alice")
        #expect(next.json["viewer"] as? String == "alice")
        #expect((next.json["posts"] as? [[String: Any]])?.map { $0["id"] as? String } == ["p1"])
        #expect(next.json["nextCursor"] is NSNull)

        let post = try sut.request("GET", "/api/posts/p2", token: "tok-bob")
        #expect(post.status == 200)
        #expect(Array(post.json.keys).sorted() == ["author", "body", "createdAt", "id", "likeCount", "liked"])
        #expect(post.text.hasPrefix(#"{"id":"p2","author":"bob","body":"post 2 by bob","createdAt":""#))

        let page = try sut.request("GET", "/")
        #expect(page.status == 200)
        #expect(page.headers["content-type"] == "text/html; charset=utf-8")
        #expect(page.text == LivePage.html)
    }

    @Test(arguments: TestBackend.allCases)
    func writeRoutesActAsTheTokensUser(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend) else { return }
        defer { sut.close() }
        let created = try sut.request("POST", "/api/posts", token: "tok-alice", body: #"{"id":"p9","body":"hello over HTTP"}"#)
        #expect(created.status == 201)
        #expect(created.json["author"] as? String == "alice")
        #expect(created.json["liked"] as? Bool == false)
        let generated = try sut.request("POST", "/api/posts", token: "tok-bob", body: #"{"body":"no id"}"#)
        #expect(generated.status == 201)
        #expect((generated.json["id"] as? String)?.hasPrefix("post-") == true)

        let liked = try sut.request("PUT", "/api/posts/p9/like", token: "tok-bob")
        #expect(liked.status == 200)
        #expect(liked.text == #"{"postID":"p9","userID":"bob","liked":true,"likeCount":1,"changed":true,"seq":9}"#)
        let again = try sut.request("PUT", "/api/posts/p9/like", token: "tok-bob")
        #expect(again.text == #"{"postID":"p9","userID":"bob","liked":true,"likeCount":1,"changed":false,"seq":null}"#)
        let seen = try sut.request("GET", "/api/posts/p9", token: "tok-bob")
        #expect(seen.json["liked"] as? Bool == true)
        let unliked = try sut.request("DELETE", "/api/posts/p9/like", token: "tok-bob")
        #expect(unliked.text == #"{"postID":"p9","userID":"bob","liked":false,"likeCount":0,"changed":true,"seq":10}"#)
        #expect(try sut.service.post(id: "p9", viewerID: "bob").liked == false)
    }

    @Test(arguments: TestBackend.allCases)
    func errorsAreJSONWithTheirStatusAndCode(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend) else { return }
        defer { sut.close() }
        let cases: [(HTTPTestResponse, Int, String)] = [
            (try sut.request("GET", "/api/posts/nope"), 404, "postNotFound"),
            (try sut.request("PUT", "/api/posts/nope/like", token: "tok-alice"), 404, "postNotFound"),
            (try sut.request("GET", "/api/nothing"), 404, "notFound"),
            (try sut.request("GET", "/api/posts/p1/like/x"), 404, "notFound"),
            (try sut.request("GET", "/api/feed?limit=0"), 400, "invalidLimit"),
            (try sut.request("GET", "/api/feed?limit=1001"), 400, "invalidLimit"),
            (try sut.request("GET", "/api/feed?limit=abc"), 400, "invalidLimit"),
            (try sut.request("GET", "/api/feed?before=nonsense"), 400, "invalidRequest"),
            (try sut.request("POST", "/api/posts", token: "tok-alice", body: "{not json"), 400, "invalidRequest"),
            (try sut.request("POST", "/api/posts", token: "tok-alice", body: #"{"id":"p1","body":"dup"}"#), 409, "postAlreadyExists"),
            (try sut.request("POST", "/api/posts", token: "tok-alice", body: #"{"body":""}"#), 400, "invalidValue"),
            (try sut.request("POST", "/api/posts", token: "tok-alice", body: #"{"id":"a b","body":"x"}"#), 400, "invalidValue"),
            (try sut.request("GET", "/api/events?after=-1", token: "tok-alice"), 400, "invalidRequest"),
            (try sut.request("POST", "/api/sync/pull", token: "tok-alice", body: "[]"), 400, "invalidRequest"),
        ]
        for (response, status, code) in cases {
            #expect(response.status == status, "\(response.text)")
            #expect(response.headers["content-type"] == "application/json")
            #expect(response.json["code"] as? String == code, "\(response.text)")
            #expect((response.json["error"] as? String).map { !$0.isEmpty && !$0.contains("\n") } == true)
        }
    }

    @Test func aKnownPathWithAnotherMethodIs405WithAllow() throws {
        guard let sut = try ServerFixture(on: .sqlite) else { return }
        defer { sut.close() }
        for (method, path, allow) in [
            ("POST", "/api/feed", "GET"), ("GET", "/api/posts", "POST"), ("POST", "/api/posts/p1/like", "DELETE, PUT"),
            ("PUT", "/api/posts/p1", "DELETE, GET"), ("GET", "/api/me", "DELETE"), ("GET", "/api/sync/push", "POST"),
            ("PUT", "/health", "GET"), ("POST", "/api/events", "GET"), ("DELETE", "/", "GET"),
        ] {
            let response = try sut.request(method, path)
            #expect(response.status == 405, "\(method) \(path)")
            #expect(response.headers["allow"] == allow)
            #expect(response.json["code"] as? String == "methodNotAllowed")
        }
    }

    @Test func tokensDecideWhoActsAndWrongOnesAre401() throws {
        guard let sut = try ServerFixture(on: .sqlite) else { return }
        defer { sut.close() }
        let refused: [HTTPTestResponse] = [
            try sut.request("POST", "/api/posts", body: #"{"body":"anonymous"}"#),
            try sut.request("PUT", "/api/posts/p1/like"),
            try sut.request("PUT", "/api/posts/p1/like", token: "tok-gone"),
            try sut.request("PUT", "/api/posts/p1/like", headers: ["Authorization": "Basic YWxpY2U6eA=="]),
            try sut.request("PUT", "/api/posts/p1/like", headers: ["Authorization": "Bearer"]),
            try sut.request("PUT", "/api/posts/p1/like", headers: ["Authorization": "Bearer a b"]),
            try sut.request("POST", "/api/sync/push", body: "{}"),
            // Viewer routes: anonymous without a token, but a wrong token is refused.
            try sut.request("GET", "/api/feed", token: "tok-gone"),
            try sut.request("GET", "/api/posts/p1", token: "tok-gone"),
        ]
        for response in refused {
            #expect(response.status == 401)
            #expect(response.json["code"] as? String == "unauthorized")
            #expect(response.headers["www-authenticate"] == "Bearer")
        }
        #expect(try sut.request("GET", "/api/feed").status == 200)
        #expect(try sut.request("GET", "/health", token: "tok-gone").status == 200)
        #expect(try sut.request("PUT", "/api/posts/p1/like", headers: ["Authorization": "bearer tok-alice"]).status == 200)
        #expect(try sut.service.post(id: "p1", viewerID: "alice").liked)
        #expect(try sut.service.post(id: "p1", viewerID: "bob").liked == false)
    }

    @Test func bodiesOverTheLimitAre413() throws {
        guard let sut = try ServerFixture(on: .sqlite) else { return }
        defer { sut.close() }
        // Declared too large: answered from the headers.
        let declared = try HTTPTestClient.raw(
            Array("POST /api/posts HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer tok-alice\r\nContent-Length: 70000\r\n\r\n".utf8),
            port: sut.port)
        #expect(declared.status == 413)
        #expect(declared.json["code"] as? String == "bodyTooLarge")
        // Chunked: counted as it arrives, answered once it is read.
        let text = #"{"body":""# + String(repeating: "x", count: 70000) + #""}"#
        let chunked = try sut.request(
            "POST", "/api/posts", token: "tok-alice", headers: ["Transfer-Encoding": "chunked"],
            body: String(text.utf8.count, radix: 16) + "\r\n" + text + "\r\n0\r\n\r\n")
        #expect(chunked.status == 413)
        // Just under the limit is read (and refused by the service for its length, not by the server).
        let under = try sut.request(
            "POST", "/api/posts", token: "tok-alice", body: #"{"body":""# + String(repeating: "y", count: 60000) + #""}"#)
        #expect(under.status == 400)
        #expect(under.json["code"] as? String == "invalidValue")
        // A sync push may be larger.
        let push = try sut.request("POST", "/api/sync/push", token: "tok-alice", body: "[" + String(repeating: " ", count: 100_000) + "]")
        #expect(push.status == 400)
        #expect(push.json["code"] as? String == "invalidRequest")
    }

    @Test func headersOverTheLimitAre431AndTheServerGoesOn() throws {
        guard let sut = try ServerFixture(on: .sqlite) else { return }
        defer { sut.close() }
        let big = try sut.request("GET", "/health", headers: ["X-Padding": String(repeating: "a", count: 20_000)])
        #expect(big.status == 431)
        #expect(try sut.request("GET", "/health", headers: ["X-Padding": String(repeating: "a", count: 10_000)]).status == 200)
    }

    @Test func syncRoutesAnswerAsTheTokensUser() throws {
        guard let sut = try ServerFixture(on: .sqlite) else { return }
        defer { sut.close() }
        let request = String(decoding: try JSONEncoder().encode(PullRequest(clientID: "client-1", after: nil)), as: UTF8.self)
        let pull = try sut.request("POST", "/api/sync/pull", token: "tok-alice", body: request)
        #expect(pull.status == 200, "\(pull.text)")
        #expect(pull.headers["content-type"] == "application/json")
        let response = try JSONDecoder().decode(PullResponse.self, from: pull.body)
        #expect(response.through == 6)
        #expect(response.snapshot?.posts.map(\.id).sorted() == ["p1", "p2", "p3"])
    }

    @Test func listensOnIPv6Loopback() throws {
        guard let sut = try ServerFixture(on: .sqlite, configure: { $0.host = "::1" }) else { return }
        defer { sut.close() }
        let health = try HTTPTestClient.request("GET", "/health", port: sut.port, host: "::1")
        #expect(health.status == 200)
    }

    @Test func aTakenPortIsAnError() throws {
        guard let sut = try ServerFixture(on: .sqlite) else { return }
        defer { sut.close() }
        var configuration = ServerConfiguration()
        configuration.port = sut.port
        #expect(throws: HTTPServerError.addressInUse(host: "127.0.0.1", port: sut.port)) {
            _ = try HTTPServer(service: sut.service, configuration: configuration) { _ throws(FeedError) in nil }
        }
        configuration.host = "localhost"
        #expect(throws: HTTPServerError.invalidAddress("localhost")) {
            _ = try HTTPServer(service: sut.service, configuration: configuration) { _ throws(FeedError) in nil }
        }
    }
}
