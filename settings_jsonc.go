// settings_jsonc.go owns the JSONC pre-pass of the settings file: Qwen
// Code's settings files may start with a UTF-8 byte order mark and carry
// comments, and Qwen's own MCP documentation shows trailing commas.
package main

// blankJSONC returns a copy of data, of the same length, in which a leading
// UTF-8 byte order mark, every // and /* */ comment outside a string, and
// every trailing comma before a } or ] are blanked with spaces (a comment's
// newlines are kept), so that the strict checks after it (the settings walker: exact
// names, no duplicates, exact numbers) run unchanged and an error's byte
// offset still points into the file as written. String contents are never
// touched. Trailing commas are a deliberate leniency: Qwen Code refuses
// them, but its MCP documentation uses them (DESIGN.md §10). An unterminated
// block comment, a comma with nothing before it ([,]) and a lone / are left
// as written, for the JSON checks to refuse.
func blankJSONC(data []byte) []byte {
	out := append([]byte(nil), data...)
	i := 0
	if len(out) >= 3 && out[0] == 0xEF && out[1] == 0xBB && out[2] == 0xBF {
		out[0], out[1], out[2] = ' ', ' ', ' '
		i = 3
	}
	// last and prev are the offsets of the last two bytes outside comments
	// and whitespace: a string counts as its closing quote.
	last, prev := -1, -1
	mark := func(at int) { prev, last = last, at }
	for i < len(out) {
		switch c := out[i]; {
		case c == '"':
			i++
			for i < len(out) && out[i] != '"' {
				if out[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(out) {
				return out // unterminated string: the JSON checks say so
			}
			mark(i)
			i++
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for i < len(out) && out[i] != '\n' {
				out[i] = ' '
				i++
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			end := -1
			for j := i + 2; j+1 < len(out); j++ {
				if out[j] == '*' && out[j+1] == '/' {
					end = j + 2
					break
				}
			}
			if end < 0 {
				return out
			}
			for ; i < end; i++ {
				if out[i] != '\n' && out[i] != '\r' {
					out[i] = ' '
				}
			}
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			i++
		case c == '}' || c == ']':
			if last >= 0 && out[last] == ',' && prev >= 0 && out[prev] != ',' && out[prev] != '{' && out[prev] != '[' && out[prev] != ':' {
				out[last] = ' '
			}
			mark(i)
			i++
		default:
			mark(i)
			i++
		}
	}
	return out
}
