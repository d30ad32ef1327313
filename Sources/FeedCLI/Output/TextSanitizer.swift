/// Makes user data safe to print on a terminal: no escape sequences, no line breaks, no bidi overrides.
enum TextSanitizer {
    /// `text` with control characters (C0, DEL, C1), line/paragraph separators and bidi controls removed; tabs and
    /// line breaks become spaces, so one value stays on one line.
    static func clean(_ text: String) -> String {
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x09, 0x0A, 0x0D, 0x2028, 0x2029: result.append(" ")
            case 0x00...0x1F, 0x7F...0x9F: continue
            case 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: continue
            default: result.append(scalar)
            }
        }
        return String(result)
    }

    /// `clean(text)` cut to `width` display columns, ending with `…` when cut.
    static func shortened(_ text: String, width: Int) -> String {
        let cleaned = clean(text)
        guard DisplayWidth.of(cleaned) > width else { return cleaned }
        var result = ""
        var used = 0
        for character in cleaned {
            let characterWidth = DisplayWidth.of(character)
            if used + characterWidth > width - 1 { break }
            result.append(character)
            used += characterWidth
        }
        return result + "…"
    }
}
