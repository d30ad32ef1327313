/// The page `GET /` serves: a placeholder until the live page is written.
package enum LivePage {
    /// The page's HTML.
    package static let html: String = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>FeedSync</title></head>
        <body><h1>FeedSync</h1><p>The JSON API is under <code>/api/</code>; see Docs/HTTP.md.</p></body></html>
        """
}
