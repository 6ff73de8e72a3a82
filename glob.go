// glob.go owns the one glob engine: brace expansion, "**" over path
// segments, and the patterns of the glob tool and of path permission rules.
// A backslash escapes the next byte, in braces as in path.Match.
package main

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// maxBraceExpansion bounds the patterns one {a,b} pattern expands to, so
// that matching stays cheap whatever the model or a rule writes.
const maxBraceExpansion = 64

// maxPatternBytes bounds a glob pattern, and the grep tool's regular
// expression, so that compiling one stays cheap whatever the model writes.
const maxPatternBytes = 4096

// globMatcher matches slash-separated paths relative to a search root.
type globMatcher struct {
	alternatives [][]string // brace-expanded patterns, split into segments
}

// compileGlob checks a glob pattern: relative, no "..", valid path.Match
// segments, "**" for any number of directories, {a,b} alternatives.
func compileGlob(pattern string) (*globMatcher, error) {
	if pattern == "" {
		return nil, errors.New("pattern is empty")
	}
	return compileAlternatives(pattern, func(p string) ([]string, error) {
		if strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("pattern %q is absolute; give a pattern relative to path", pattern)
		}
		segs := strings.Split(p, "/")
		if slices.Contains(segs, "..") {
			return nil, fmt.Errorf("pattern %q leaves the search directory", pattern)
		}
		return segs, nil
	})
}

// compileAbsGlob checks a pattern over absolute, cleaned paths (the reads
// and writes of a policy's shell rules): absolute, no "." or ".." segment,
// otherwise compileGlob's patterns.
func compileAbsGlob(pattern string) (*globMatcher, error) {
	if !strings.HasPrefix(pattern, "/") {
		return nil, fmt.Errorf("pattern %q is relative; give an absolute path pattern, e.g. %q", pattern, "/srv/work/**")
	}
	return compileAlternatives(pattern, func(p string) ([]string, error) {
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("pattern %q has a relative alternative %q; give absolute ones", pattern, p)
		}
		segs := pathSegments(p)
		if slices.Contains(segs, "..") || slices.Contains(segs, ".") {
			return nil, fmt.Errorf("pattern %q has a %q or %q segment; the paths it meets are cleaned", pattern, ".", "..")
		}
		return segs, nil
	})
}

// compileAlternatives bounds pattern, expands its braces and checks each
// alternative's segments with path.Match, splitting each with segments,
// which refuses what its kind of pattern may not hold.
func compileAlternatives(pattern string, segments func(alt string) ([]string, error)) (*globMatcher, error) {
	if len(pattern) > maxPatternBytes {
		return nil, fmt.Errorf("pattern is longer than %d bytes", maxPatternBytes)
	}
	pats, err := expandBraces(pattern)
	if err != nil {
		return nil, err
	}
	m := &globMatcher{}
	for _, p := range pats {
		segs, err := segments(p)
		if err != nil {
			return nil, err
		}
		if err := checkPathPattern(p); err != nil {
			return nil, err
		}
		m.alternatives = append(m.alternatives, segs)
	}
	return m, nil
}

// matchAbs matches an absolute path against a compileAbsGlob pattern.
func (m *globMatcher) matchAbs(p string) bool {
	return path.IsAbs(p) && m.match(strings.TrimPrefix(p, "/"))
}

func (m *globMatcher) match(rel string) bool {
	name := strings.Split(rel, "/")
	for _, alt := range m.alternatives {
		if globSegments(alt, name, globFull) {
			return true
		}
	}
	return false
}

// expandBraces expands {a,b} alternatives, nested or not. A brace left as a
// literal would make a deny rule like Read(**/*.{env,pem}) match nothing,
// silently; an unbalanced one is an error.
func expandBraces(p string) ([]string, error) {
	open, depth := -1, 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth == 0 {
				return nil, fmt.Errorf("unbalanced \"}\" in %q", p)
			}
			depth--
			if depth > 0 {
				continue
			}
			var alts []string
			start, d := open+1, 0
			for j := open + 1; j < i; j++ {
				switch p[j] {
				case '\\':
					j++
				case '{':
					d++
				case '}':
					d--
				case ',':
					if d == 0 {
						alts = append(alts, p[start:j])
						start = j + 1
					}
				}
			}
			alts = append(alts, p[start:i])
			var out []string
			for _, a := range alts {
				more, err := expandBraces(p[:open] + a + p[i+1:])
				if err != nil {
					return nil, err
				}
				out = append(out, more...)
				if len(out) > maxBraceExpansion {
					return nil, fmt.Errorf("%q expands to more than %d patterns", p, maxBraceExpansion)
				}
			}
			return out, nil
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced \"{\" in %q", p)
	}
	return []string{p}, nil
}

func checkPathPattern(p string) error {
	for _, seg := range strings.Split(p, "/") {
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("bad path pattern %q: %w", p, err)
		}
	}
	return nil
}

func pathSegments(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "/"), "/")
}

// globMode says which paths a glob is tested against.
type globMode int

const (
	globFull     globMode = iota // the name itself
	globAnyBelow                 // some path at or below the name
	globAllBelow                 // every path at or below the name
)

// globSegments matches path segments against pattern segments, "**"
// standing for any number of segments, in O(len(pat)·len(name)) time and
// O(len(pat)+len(name)) memory whatever the model sends.
func globSegments(pat, name []string, mode globMode) bool {
	np, nn := len(pat), len(name)
	onlyStars := make([]bool, np+1) // pat[i:] is one or more "**"
	for i := np - 1; i >= 0; i-- {
		onlyStars[i] = pat[i] == "**" && (i == np-1 || onlyStars[i+1])
	}
	// row[j]: pat[i:] against name[j:] (and what lies below it, by mode);
	// below is the same for pat[i+1:].
	row, below := make([]bool, nn+1), make([]bool, nn+1)
	for i := np; i >= 0; i-- {
		for j := nn; j >= 0; j-- {
			var v bool
			switch {
			case mode == globAnyBelow && j == nn:
				v = true // what is left of the pattern can name something below
			case mode == globAllBelow && onlyStars[i]:
				v = true
			case i == np:
				v = mode == globFull && j == nn
			case pat[i] == "**":
				v = below[j] || j < nn && row[j+1]
			case j < nn:
				ok, _ := path.Match(pat[i], name[j])
				v = ok && below[j+1]
			}
			row[j] = v
		}
		row, below = below, row
	}
	return below[0]
}
