package import Foundation

/// Adds rows in bulk inside ``FeedBackend/bulkLoad(_:)``: no events, checks deferred to the end of the load.
package protocol FeedBulkLoader: AnyObject {
    /// Adds a user and returns its key.
    func addUser(id: String, name: String, createdAt: Date) throws -> Int64
    /// Adds a post by the user with id `authorID` (added earlier in this load or before it) and returns its key.
    func addPost(id: String, authorID: String, body: String, createdAt: Date) throws -> Int64
    /// Adds a like unless the pair exists; returns whether it was added.
    func addLikeIfAbsent(userKey: Int64, postKey: Int64, createdAtMillis: Int64) throws -> Bool
}
