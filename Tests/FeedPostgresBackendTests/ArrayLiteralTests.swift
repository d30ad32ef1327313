import FeedCore
@testable import FeedPostgresBackend
import Foundation
import Testing

/// The array literals bound as one text parameter read back on the server as the values they were made from.
@Suite struct ArrayLiteralTests {
    @Test func textArraysReadBackElementByElement() throws {
        let values: [String?] = ["plain", "a \"quoted\" word", "back\\slash", nil, "NULL", "", "é, 😀 {braces}", ","]
        #expect(PostgresArray.text(["a\"b", nil]) == #"{"a\"b",NULL}"#)
        guard let db = try TestDatabase.make("array_literal") else { return }
        let rows = try db.admin(
            "SELECT ordinality, element FROM unnest($1::text[]) WITH ORDINALITY AS e(element, ordinality) ORDER BY 1",
            [.text(PostgresArray.text(values))])
        #expect(rows.map { $0[1].text } == values)
        let numbers: [Int64?] = [0, -1, nil, Int64.max, Int64.min]
        let read = try db.admin(
            "SELECT element FROM unnest($1::bigint[]) WITH ORDINALITY AS e(element, ordinality) ORDER BY ordinality",
            [.text(PostgresArray.integers(numbers))])
        #expect(read.map { $0[0].integer } == numbers)
    }
}
