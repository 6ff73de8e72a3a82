// glob.go owns the one glob engine: brace expansion, "**" over path
// segments, and the patterns of the glob tool and of path permission rules.
package main

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

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
	if len(pattern) > maxPatternBytes {
		return nil, fmt.Errorf("pattern is longer than %d bytes", maxPatternBytes)
	}
	pats, err := expandBraces(pattern)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	m := &globMatcher{}
	for _, p := range pats {
		if strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("pattern %q is absolute; give a pattern relative to path", pattern)
		}
		segs := strings.Split(p, "/")
		for _, s := range segs {
			if s == ".." {
				return nil, fmt.Errorf("pattern %q leaves the search directory", pattern)
			}
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("pattern %q: %w", pattern, err)
			}
		}
		m.alternatives = append(m.alternatives, segs)
	}
	return m, nil
}

// expandBraces expands {a,b} alternatives, nested or not.
func expandBraces(p string) ([]string, error) {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		if strings.IndexByte(p, '}') >= 0 {
			return nil, errors.New("unbalanced '}'")
		}
		return []string{p}, nil
	}
	depth, start := 0, open+1
	var parts []string
	for i := open; i < len(p); i++ {
		switch p[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				parts = append(parts, p[start:i])
				var out []string
				for _, part := range parts {
					tails, err := expandBraces(part + p[i+1:])
					if err != nil {
						return nil, err
					}
					for _, t := range tails {
						out = append(out, p[:open]+t)
						if len(out) > maxBraceExpansion {
							return nil, fmt.Errorf("more than %d alternatives", maxBraceExpansion)
						}
					}
				}
				return out, nil
			}
		case ',':
			if depth == 1 {
				parts = append(parts, p[start:i])
				start = i + 1
			}
		}
	}
	return nil, errors.New("unbalanced '{'")
}

func (m *globMatcher) match(rel string) bool {
	name := strings.Split(rel, "/")
	for _, alt := range m.alternatives {
		if matchSegments(alt, name) {
			return true
		}
	}
	return false
}

// matchSegments matches pattern segments against name segments in
// O(len(pat)*len(name)) time, whatever the number of "**".
func matchSegments(pat, name []string) bool {
	cur := make([]bool, len(name)+1) // cur[j]: the segments so far match name[:j]
	cur[0] = true
	next := make([]bool, len(name)+1)
	for _, seg := range pat {
		clear(next)
		if seg == "**" {
			seen := false
			for j := range cur {
				seen = seen || cur[j]
				next[j] = seen
			}
		} else {
			for j := 1; j <= len(name); j++ {
				if cur[j-1] {
					next[j], _ = path.Match(seg, name[j-1])
				}
			}
		}
		cur, next = next, cur
	}
	return cur[len(name)]
}

// expandPathBraces expands {a,b} alternatives in a path specifier. A brace
// left as a literal would make a deny rule like Read(**/*.{env,pem}) match
// nothing, silently.
func expandPathBraces(p string) ([]string, error) {
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
				more, err := expandPathBraces(p[:open] + a + p[i+1:])
				if err != nil {
					return nil, err
				}
				out = append(out, more...)
				if len(out) > maxRuleExpansions {
					return nil, fmt.Errorf("%q expands to more than %d patterns", p, maxRuleExpansions)
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

// globSegments matches path segments against pattern segments, "**"
// standing for any number of segments, in O(len(pat)·len(name)) whatever
// the model sends.
func globSegments(pat, name []string, mode globMode) bool {
	np, nn := len(pat), len(name)
	onlyStars := make([]bool, np+1) // pat[i:] is one or more "**"
	for i := np - 1; i >= 0; i-- {
		onlyStars[i] = pat[i] == "**" && (i == np-1 || onlyStars[i+1])
	}
	// m[i][j]: pat[i:] against name[j:] (and what lies below it, by mode).
	m := make([][]bool, np+1)
	for i := range m {
		m[i] = make([]bool, nn+1)
	}
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
				v = m[i+1][j] || j < nn && m[i][j+1]
			case j < nn:
				ok, _ := path.Match(pat[i], name[j])
				v = ok && m[i+1][j+1]
			}
			m[i][j] = v
		}
	}
	return m[0][0]
}

const (
	globFull     globMode = iota // the name itself
	globAnyBelow                 // some path at or below the name
	globAllBelow                 // every path at or below the name
)
