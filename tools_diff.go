// tools_diff.go owns the file result a completed write_file or edit reports
// in rawOutput, with Qwen Code's keys (DESIGN.md §7): the unified diff of
// the change (fileDiff), the file's base name and path, both contents, and
// the counts of lines and characters the change adds and removes.
package main

import (
	"path/filepath"
	"strconv"
	"strings"
)

// maxFileResultTextBytes bounds both contents together for rawOutput to
// carry them and their diff: the finishing update then holds each text
// about four times (the diff content, the two contents, the unified diff),
// and with JSON's worst escaping of six bytes per byte it stays below
// serve's maxChildLine. Above it rawOutput carries the names and counts
// only; the diff content has its own bound (maxDiffTextBytes).
const maxFileResultTextBytes = 128 << 10

// diffContextLines are the unchanged lines shown around a change, as the
// unified diffs Qwen Code writes show them.
const diffContextLines = 3

// Headers of the two sides of a diff, Qwen Code's: an edit compares the
// current file with the proposed one, a write the original with the
// written one.
const (
	diffHeaderEditOld  = "Current"
	diffHeaderEditNew  = "Proposed"
	diffHeaderWriteOld = "Original"
	diffHeaderWriteNew = "Written"
)

// diffSeparator is the line under a unified diff's Index line.
const diffSeparator = "==================================================================="

// oldText is the file's content before the change, "" for a new file.
func (d *fileDiff) oldText() string {
	if d.Old == nil {
		return ""
	}
	return *d.Old
}

// fileDiffStat is Qwen Code's diffStat: what the model's change adds and
// removes, in lines and in characters (UTF-16 code units, as Qwen counts
// them); the user_ counts are of a user's changes to the proposal, which
// acpguard never takes, so 0.
type fileDiffStat struct {
	ModelAddedLines   int `json:"model_added_lines"`
	ModelRemovedLines int `json:"model_removed_lines"`
	ModelAddedChars   int `json:"model_added_chars"`
	ModelRemovedChars int `json:"model_removed_chars"`
	UserAddedLines    int `json:"user_added_lines"`
	UserRemovedLines  int `json:"user_removed_lines"`
	UserAddedChars    int `json:"user_added_chars"`
	UserRemovedChars  int `json:"user_removed_chars"`
}

// fileResult is the rawOutput of a completed write_file (write true) or
// edit of p: base, acpguard's own keys, with Qwen Code's file result keys
// added. d is the change made, nil when it is not shown (above
// maxDiffTextBytes or unreadable): then only the names are added, as
// for a change above maxFileResultTextBytes.
func fileResult(p string, d *fileDiff, write bool, base map[string]any) map[string]any {
	name := filepath.Base(p)
	base["fileName"], base["filePath"] = name, p
	if d == nil || len(d.oldText())+len(d.New) > maxFileResultTextBytes {
		return base
	}
	oldHeader, newHeader := diffHeaderEditOld, diffHeaderEditNew
	if write {
		oldHeader, newHeader = diffHeaderWriteOld, diffHeaderWriteNew
	}
	patch, stat := unifiedDiff(name, d.oldText(), d.New, oldHeader, newHeader)
	base["fileDiff"], base["originalContent"], base["newContent"], base["diffStat"] = patch, d.oldText(), d.New, stat
	return base
}

// unifiedDiff is the unified diff of oldText and newText under name, in
// the layout Qwen Code's diffs have (an Index line, the separator, the two
// headers, hunks with diffContextLines of context, "\ No newline at end
// of file" after a last line without one), and its counts. The changed
// lines are those between the texts' common first and last lines: one hunk,
// exact for an edit of one place, larger than a minimal diff's when a
// change touches places far apart.
func unifiedDiff(name, oldText, newText, oldHeader, newHeader string) (string, fileDiffStat) {
	a, b := diffLines(oldText), diffLines(newText)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var w strings.Builder
	w.WriteString("Index: " + name + "\n" + diffSeparator + "\n")
	w.WriteString("--- " + name + "\t" + oldHeader + "\n+++ " + name + "\t" + newHeader + "\n")
	removed, added := a[pre:len(a)-suf], b[pre:len(b)-suf]
	var stat fileDiffStat
	if len(removed) == 0 && len(added) == 0 {
		return w.String(), stat
	}
	before := min(pre, diffContextLines)
	after := min(suf, diffContextLines)
	oldCount, newCount := before+len(removed)+after, before+len(added)+after
	w.WriteString("@@ -" + hunkRange(pre-before+1, oldCount) + " +" + hunkRange(pre-before+1, newCount) + " @@\n")
	for _, l := range a[pre-before : pre] {
		writeDiffLine(&w, ' ', l)
	}
	for _, l := range removed {
		writeDiffLine(&w, '-', l)
		stat.ModelRemovedLines++
		stat.ModelRemovedChars += utf16Units(strings.TrimSuffix(l, "\n"))
	}
	for _, l := range added {
		writeDiffLine(&w, '+', l)
		stat.ModelAddedLines++
		stat.ModelAddedChars += utf16Units(strings.TrimSuffix(l, "\n"))
	}
	for _, l := range a[len(a)-suf : len(a)-suf+after] {
		writeDiffLine(&w, ' ', l)
	}
	return w.String(), stat
}

// diffLines splits s into lines that keep their "\n"; the last may lack one.
func diffLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// hunkRange is one side of a hunk header: start,count, with the line
// before the hunk as start when the side is empty.
func hunkRange(start, count int) string {
	if count == 0 {
		start--
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(count)
}

func writeDiffLine(w *strings.Builder, mark byte, line string) {
	w.WriteByte(mark)
	w.WriteString(line)
	if !strings.HasSuffix(line, "\n") {
		w.WriteString("\n\\ No newline at end of file\n")
	}
}

// utf16Units is the length of s in UTF-16 code units, JavaScript's length.
func utf16Units(s string) int {
	n := 0
	for _, r := range s {
		n += utf16Len(r)
	}
	return n
}
