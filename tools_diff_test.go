// tools_diff_test.go tests the file result of write_file and edit: the
// unified diff and counts Qwen Code's hosts read in rawOutput.
package main

import (
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	ten := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"
	head := func(name, o, n string) string {
		return "Index: " + name + "\n" + diffSeparator + "\n--- " + name + "\t" + o + "\n+++ " + name + "\t" + n + "\n"
	}
	for _, tt := range []struct {
		name, old, new string
		want           string
		stat           fileDiffStat
	}{
		{"one line changed", "one\ntwo\n", "one\nTWO\n",
			head("f.txt", "Current", "Proposed") + "@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n",
			fileDiffStat{ModelAddedLines: 1, ModelRemovedLines: 1, ModelAddedChars: 3, ModelRemovedChars: 3}},
		{"new file without a last newline", "", "fresh",
			head("f.txt", "Current", "Proposed") + "@@ -0,0 +1,1 @@\n+fresh\n\\ No newline at end of file\n",
			fileDiffStat{ModelAddedLines: 1, ModelAddedChars: 5}},
		{"three lines of context", ten, strings.Replace(ten, "5\n", "five\n", 1),
			head("f.txt", "Current", "Proposed") + "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n",
			fileDiffStat{ModelAddedLines: 1, ModelRemovedLines: 1, ModelAddedChars: 4, ModelRemovedChars: 1}},
		{"lines removed at the end", "a\nb\nc\n", "a\n",
			head("f.txt", "Current", "Proposed") + "@@ -1,3 +1,1 @@\n a\n-b\n-c\n",
			fileDiffStat{ModelRemovedLines: 2, ModelRemovedChars: 2}},
		{"a newline added at the end", "a", "a\n",
			head("f.txt", "Current", "Proposed") + "@@ -1,1 +1,1 @@\n-a\n\\ No newline at end of file\n+a\n",
			fileDiffStat{ModelAddedLines: 1, ModelRemovedLines: 1, ModelAddedChars: 1, ModelRemovedChars: 1}},
		{"characters counted as JavaScript counts them", "", "é😀\n",
			head("f.txt", "Current", "Proposed") + "@@ -0,0 +1,1 @@\n+é😀\n",
			fileDiffStat{ModelAddedLines: 1, ModelAddedChars: 3}},
		{"no change", "same\n", "same\n", head("f.txt", "Current", "Proposed"), fileDiffStat{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, stat := unifiedDiff("f.txt", tt.old, tt.new, diffHeaderEditOld, diffHeaderEditNew)
			if got != tt.want {
				t.Errorf("diff:\n%s\nwant:\n%s", got, tt.want)
			}
			if stat != tt.stat {
				t.Errorf("stat = %+v, want %+v", stat, tt.stat)
			}
		})
	}
}

// fileResult adds Qwen Code's keys beside acpguard's own; a change too
// large for one update gets the names only.
func TestFileResult(t *testing.T) {
	old := "a\n"
	large := strings.Repeat("x", maxFileResultTextBytes)
	for _, tt := range []struct {
		name  string
		d     *fileDiff
		write bool
		keys  []string
	}{
		{"edit", &fileDiff{Path: "/w/f.txt", Old: &old, New: "b\n"}, false,
			[]string{"path", "fileName", "filePath", "fileDiff", "originalContent", "newContent", "diffStat"}},
		{"new file", &fileDiff{Path: "/w/f.txt", New: "b\n"}, true,
			[]string{"path", "fileName", "filePath", "fileDiff", "originalContent", "newContent", "diffStat"}},
		{"too large together", &fileDiff{Path: "/w/f.txt", Old: &old, New: large}, true, []string{"path", "fileName", "filePath"}},
		{"not shown", nil, false, []string{"path", "fileName", "filePath"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := fileResult("/w/f.txt", tt.d, tt.write, map[string]any{"path": "/w/f.txt"})
			if len(got) != len(tt.keys) {
				t.Errorf("keys = %d, want %q", len(got), tt.keys)
			}
			for _, k := range tt.keys {
				if _, ok := got[k]; !ok {
					t.Errorf("rawOutput lacks %q", k)
				}
			}
			if got["fileName"] != "f.txt" || got["filePath"] != "/w/f.txt" {
				t.Errorf("names = %v, %v", got["fileName"], got["filePath"])
			}
			if o, ok := got["originalContent"]; ok && tt.d.Old == nil && o != "" {
				t.Errorf("new file's originalContent = %#v, want \"\"", o)
			}
			if p, _ := got["fileDiff"].(string); p != "" && tt.write != strings.Contains(p, "\tWritten\n") {
				t.Errorf("fileDiff headers = %q, want Original/Written for a write only", p)
			}
		})
	}
}
