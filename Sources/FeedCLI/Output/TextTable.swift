/// Left- or right-aligned columns separated by two spaces; styling is applied after padding so escape codes do
/// not disturb alignment.
struct TextTable: Sendable {
    /// How a column aligns.
    enum Alignment: Sendable { case left, right }

    /// The column headers.
    let headers: [String]
    /// Each column's alignment.
    let alignments: [Alignment]
    /// The rows (already sanitized text).
    var rows: [[String]] = []

    /// The lines: a header line, then one line per row; `style` paints cells after padding (column, text).
    func lines(header: (String) -> String = { $0 }, style: (Int, String) -> String = { $1 }) -> [String] {
        var widths = headers.map(DisplayWidth.of)
        for row in rows {
            for (column, cell) in row.enumerated() where column < widths.count {
                widths[column] = max(widths[column], DisplayWidth.of(cell))
            }
        }
        func render(_ cells: [String], paint: (Int, String) -> String) -> String {
            var parts: [String] = []
            for (column, cell) in cells.enumerated() {
                let isLast = column == cells.count - 1
                let padding = String(repeating: " ", count: max(0, widths[column] - DisplayWidth.of(cell)))
                let padded = alignments[column] == .right ? padding + paint(column, cell) : paint(column, cell) + (isLast ? "" : padding)
                parts.append(padded)
            }
            return parts.joined(separator: "  ")
        }
        return [render(headers) { header($1) }] + rows.map { render($0, paint: style) }
    }
}
