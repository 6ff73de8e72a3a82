// sandbox_protect.go owns the protected paths (DESIGN.md §5): what no
// confined process and no built-in file tool may create, change, rename or
// remove even beneath a writable root, because something unconfined later
// trusts or runs it: the settings files acpguard reads as trusted, its state
// directory and the directories of its secret files, the dot entries of the
// home directory, every git repository's hooks and config, and the
// operator's --sandbox-protect paths. It turns them into one session's mount
// plan, which the mount stage (sandbox_stage.go) puts in place for every
// confined start, and answers the built-in file tools' check.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// protectKind says what a protected path covers.
type protectKind int

const (
	// protectTree is a directory and everything beneath it; a missing one
	// is made (empty, 0700) before it is mounted, so it cannot be made later.
	protectTree protectKind = iota
	// protectFile is one file; a missing one is covered by sealing its
	// directory: that directory is mounted read-only with every other
	// existing entry mounted writable again over itself.
	protectFile
	// protectDotEntries is every entry of a directory whose name starts
	// with a dot, existing or not (the home directory): the directory is
	// sealed with each other entry writable again.
	protectDotEntries
	// protectPath is an operator's path: what it is, or sealed in its
	// directory when missing.
	protectPath
	// protectExisting is a file protected where it exists: the trusted
	// workspace's .mcp.json and .env, which are read only where they exist, so
	// that a missing one does not seal the workspace itself.
	protectExisting
	// protectGitConfig is a repository's config: a missing one is made
	// empty, which git reads as it reads none, so that the repository's
	// directory need not be sealed (git writes its index and locks there).
	protectGitConfig
)

// The rules, as errors and reports name them.
const (
	ruleSettings     = "trusted settings"
	ruleWorkspace    = "trusted workspace settings"
	ruleSystemPrompt = "system prompt file"
	ruleStateDir     = "acpguard's state directory"
	ruleSecretDir    = "the directory of acpguard's secret files"
	ruleHomeDot      = "a dot entry of the home directory"
	ruleGit          = "git hooks and config"
	ruleOperator     = "--" + flagSandboxProtect
)

// protectedPath is one protected path and the rule that protects it.
type protectedPath struct {
	Path string // absolute, clean
	Kind protectKind
	Rule string
}

// Bounds of the walk that finds a session's git repositories: a workspace
// may be a home directory or a large monorepo (a kernel tree is about
// 90,000 entries outside its .git, which the walk does not enter). At a
// bound the walk stops; a session whose walk was cut short is refused,
// naming the bound.
const (
	maxGitWalkDepth   = 16
	maxGitWalkEntries = 400_000
	maxGitWalkTime    = 3 * time.Second
)

// Bounds of the mounts one confined start makes: each costs an open_tree
// and a move_mount at every start, and a sealed directory one per entry.
const (
	maxProtectMounts = 1024
	maxSealEntries   = 512
)

// maxGitFileBytes bounds a ".git" file, "commondir" or "gitdir" read.
const maxGitFileBytes = 4096

// maxGitConfigBytes bounds the read of a repository's config for
// extensions.worktreeConfig: a tool may have written the config of a
// repository it made. A longer one is taken to set it (fail closed).
const maxGitConfigBytes = 1 << 20

// trustedSources are the inputs of trustedProtect.
type trustedSources struct {
	Settings     []settingsLayer // the settings files read, as settingsLayers lists them
	TrustedWS    bool            // the workspace file is trusted (off mode, --trust-workspace-settings)
	Workspace    string          // the session cwd, for .mcp.json and .env when trusted
	SystemPrompt string          // a --system-prompt-file or QWEN_SYSTEM_MD file, "" none
	StateDir     string          // "" none
	Secrets      []string        // acpguard's secret files (--sandbox-private)
	Home         string          // "" unknown
}

// trustedProtect lists the paths acpguard itself trusts for one session.
func trustedProtect(s trustedSources) []protectedPath {
	var out []protectedPath
	add := func(p string, k protectKind, rule string) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		out = append(out, protectedPath{filepath.Clean(p), k, rule})
	}
	// The home first: a settings directory that is a link among its dot
	// entries is then held by the home's read-only mount.
	add(s.Home, protectDotEntries, ruleHomeDot)
	for _, l := range s.Settings {
		switch l.scope {
		case scopeUser, scopeSystem, scopeSystemDefaults:
			// The file and the directory it lives in.
			add(filepath.Dir(l.path), protectTree, ruleSettings)
		case scopeOperator:
			add(l.path, protectFile, ruleSettings)
		case scopeWorkspace:
			if s.TrustedWS {
				add(filepath.Dir(l.path), protectTree, ruleWorkspace)
			}
		}
	}
	if s.TrustedWS && s.Workspace != "" {
		add(filepath.Join(s.Workspace, ".mcp.json"), protectExisting, ruleWorkspace)
		add(filepath.Join(s.Workspace, ".env"), protectExisting, ruleWorkspace)
	}
	add(s.SystemPrompt, protectFile, ruleSystemPrompt)
	add(s.StateDir, protectTree, ruleStateDir)
	for _, f := range s.Secrets {
		add(filepath.Dir(f), protectTree, ruleSecretDir)
	}
	return out
}

// operatorProtect turns --sandbox-protect and tools.sandboxProtect paths
// into protected paths.
func operatorProtect(paths []string) []protectedPath {
	out := make([]protectedPath, 0, len(paths))
	for _, p := range paths {
		out = append(out, protectedPath{filepath.Clean(p), protectPath, ruleOperator})
	}
	return out
}

// protectedList is what c protects beyond each session's repositories, as
// reports show it: the trusted paths and the operator's.
func (c sandboxConfig) protectedList() []string {
	out := []string{}
	for _, pp := range slices.Concat(c.Trusted, operatorProtect(c.Protect)) {
		p := pp.Path
		if pp.Kind == protectDotEntries {
			p = filepath.Join(p, ".*")
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// protectPlan is one session's protection: what the built-in file tools
// refuse, and the mounts of every confined start.
type protectPlan struct {
	// Paths are the protected paths with their real paths, the git
	// repositories found included.
	Paths []protectedPath
	// Mounts, shallowest first; empty when no protected path lies
	// beneath a writable root.
	Mounts []stageMount
	// First names the first protected path beneath a writable root, for
	// the refusal where mounts are unavailable.
	First, FirstRule, FirstRoot string
	// Cut says why the git walk stopped early, "" when it did not.
	Cut string
	// makeDirs and makeFiles are made before the mounts (make).
	makeDirs, makeFiles []string
}

// protectPlanner builds one protectPlan: the read-only mounts, the
// writable ones (pins and the holes of sealed directories), and the
// sealed directories with the names they keep read-only.
type protectPlanner struct {
	pl        *protectPlan
	realRoots []string
	ro        map[string]bool     // read-only mounts
	rw        map[string]bool     // writable mounts (pins and holes)
	seal      map[string][]string // sealed directories and the names they keep read-only
	dotSeal   map[string]bool     // sealed directories whose dot entries stay read-only
}

// planProtection plans the protection of a session whose writable roots
// are roots (the cwd and the --sandbox-write directories) from the
// protected paths given, adding each git repository found beneath a root.
// It makes nothing: make does, once the plan is to be used.
func planProtection(given []protectedPath, roots []string) (*protectPlan, error) {
	p := &protectPlanner{pl: &protectPlan{}, realRoots: realPaths(roots),
		ro: map[string]bool{}, rw: map[string]bool{}, seal: map[string][]string{}, dotSeal: map[string]bool{}}
	for _, pp := range given {
		if err := p.place(pp); err != nil {
			return nil, err
		}
	}
	// The git repositories beneath each root, skipping what is read-only
	// already.
	w := &gitWalk{deadline: time.Now().Add(maxGitWalkTime), skip: p.roAt}
	for _, r := range p.realRoots {
		w.walk(r)
	}
	p.pl.Cut = w.cut
	for _, pp := range w.found {
		if err := p.place(pp); err != nil {
			return nil, err
		}
	}
	if w.err != nil {
		return nil, w.err
	}
	if err := p.openHoles(); err != nil {
		return nil, err
	}
	p.pin()
	return p.mounts()
}

// rootOf is the outermost writable root p lies beneath, "" for none: the
// outermost, so that every directory on the way is pinned.
func (p *protectPlanner) rootOf(path string) string {
	out := ""
	for _, r := range p.realRoots {
		if pathUnder(path, r) && (out == "" || len(r) < len(out)) {
			out = r
		}
	}
	return out
}

// coveredBy reports whether path is read-only once the mounts are in
// place through a read-only mount other than self, so that no writable
// mount reopens what a read-only one covers.
func (p *protectPlanner) coveredBy(path, self string) bool {
	for q := range p.ro {
		if q == self || !pathUnder(path, q) {
			continue
		}
		names, sealed := p.seal[q]
		if !sealed || path == q {
			return true
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(path, q+"/"), "/")
		if !isHole(first, names, p.dotSeal[q]) {
			return true
		}
	}
	return false
}

// roAt reports whether path is read-only once the mounts are in place.
func (p *protectPlanner) roAt(path string) bool { return p.coveredBy(path, "") }

// mark makes path a read-only mount for the protected real, beneath root.
func (p *protectPlanner) mark(path, real, rule, root string) {
	p.ro[path] = true
	if p.pl.First == "" {
		p.pl.First, p.pl.FirstRule, p.pl.FirstRoot = real, rule, root
	}
}

// place adds one protected path to the plan: a read-only mount of it, of
// its directory sealed around it when it does not exist, or nothing when
// no writable root holds it.
func (p *protectPlanner) place(pp protectedPath) error {
	real := realPathOf(pp.Path)
	p.pl.Paths = append(p.pl.Paths, protectedPath{real, pp.Kind, pp.Rule})
	root := p.rootOf(real)
	if root == "" {
		return nil
	}
	if fi, err := os.Lstat(pp.Path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// A link a tool could replace, unless a read-only mount (the
		// home's dot entries) already holds it.
		parent := realPathOf(filepath.Dir(pp.Path))
		if link := filepath.Join(parent, filepath.Base(pp.Path)); p.rootOf(parent) != "" && pp.Kind != protectDotEntries && !p.roAt(link) {
			return fmt.Errorf("sandbox: protected %q (%s) is a symbolic link in the writable %q, which a tool could replace; make it the file or directory itself, or start the session where it is out of reach", pp.Path, pp.Rule, p.rootOf(parent))
		}
	}
	fi, err := os.Lstat(real)
	exists := err == nil
	switch pp.Kind {
	case protectTree:
		if !exists {
			p.pl.makeDirs = append(p.pl.makeDirs, real)
		}
		p.mark(real, real, pp.Rule, root)
	case protectGitConfig:
		if !exists {
			p.pl.makeFiles = append(p.pl.makeFiles, real)
		}
		p.mark(real, real, pp.Rule, root)
	case protectExisting:
		if exists {
			p.mark(real, real, pp.Rule, root)
		}
	case protectFile, protectPath:
		if exists {
			p.mark(real, real, pp.Rule, root)
		} else {
			d := filepath.Dir(real)
			p.seal[d] = append(p.seal[d], filepath.Base(real))
			p.mark(d, real, pp.Rule, root)
		}
	case protectDotEntries:
		if exists && fi.IsDir() {
			return p.placeDotEntries(real, pp.Rule, root)
		}
	}
	return nil
}

// placeDotEntries seals the directory real (a home in reach) around its
// dot entries, existing or not, and protects what a dot entry that is a
// link leads to, when that is in reach too.
func (p *protectPlanner) placeDotEntries(real, rule, root string) error {
	p.dotSeal[real] = true
	p.seal[real] = append(p.seal[real], "")
	p.mark(real, real, rule, root)
	entries, err := os.ReadDir(real)
	if err != nil {
		return fmt.Errorf("sandbox: list %q to protect its dot entries: %w", real, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") && e.Type()&fs.ModeSymlink != 0 {
			target := realPathOf(filepath.Join(real, e.Name()))
			if p.rootOf(target) == "" {
				continue
			}
			if err := p.place(protectedPath{target, protectPath, rule}); err != nil {
				return err
			}
		}
	}
	return nil
}

// openHoles makes each sealed directory read-only with every other entry
// writable again.
func (p *protectPlanner) openHoles() error {
	for d, names := range p.seal {
		if p.coveredBy(d, d) {
			delete(p.ro, d) // within another read-only mount already
			continue
		}
		entries, err := readDirBounded(d, maxSealEntries)
		if err != nil {
			return fmt.Errorf("sandbox: seal %q, which holds protected names: %w; start the session where it is out of reach", d, err)
		}
		for _, e := range entries {
			path := filepath.Join(d, e.Name())
			if e.Type()&fs.ModeSymlink != 0 || !isHole(e.Name(), names, p.dotSeal[d]) {
				continue
			}
			if !p.ro[path] {
				p.rw[path] = true
			}
		}
	}
	return nil
}

// pin makes every directory between a mount and its outermost root a
// writable mount of itself, so that no tool can move the way to a
// protected path and put another in its place.
func (p *protectPlanner) pin() {
	for path := range p.ro {
		root := p.rootOf(path)
		for d := filepath.Dir(path); d != root && pathUnder(d, root) && len(d) > len(root); d = filepath.Dir(d) {
			if !p.ro[d] && !p.roAt(d) {
				p.rw[d] = true
			}
		}
	}
}

// mounts puts the plan's mounts in order, shallowest first, within
// maxProtectMounts.
func (p *protectPlanner) mounts() (*protectPlan, error) {
	pl := p.pl
	for path := range p.ro {
		pl.Mounts = append(pl.Mounts, stageMount{Path: path, ReadOnly: true})
	}
	for path := range p.rw {
		if !p.ro[path] {
			pl.Mounts = append(pl.Mounts, stageMount{Path: path})
		}
	}
	slices.SortFunc(pl.Mounts, func(a, b stageMount) int {
		if da, db := strings.Count(a.Path, "/"), strings.Count(b.Path, "/"); da != db {
			return da - db
		}
		return strings.Compare(a.Path, b.Path)
	})
	if len(pl.Mounts) > maxProtectMounts {
		return nil, fmt.Errorf("sandbox: protecting the paths in reach takes %d mounts, more than %d; start the session in a smaller directory", len(pl.Mounts), maxProtectMounts)
	}
	return pl, nil
}

// isHole reports whether the entry name of a sealed directory is writable
// again: not one of the protected names, nor a dot entry where those stay
// read-only.
func isHole(name string, protected []string, dots bool) bool {
	return !slices.Contains(protected, name) && !(dots && strings.HasPrefix(name, "."))
}

// readDirBounded lists at most limit entries of dir, failing beyond.
func readDirBounded(dir string, limit int) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(limit + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(entries) > limit {
		return nil, fmt.Errorf("more than %d entries, each a mount at every start", limit)
	}
	return entries, nil
}

// make makes the missing protected directories (0700) and git configs
// (empty), before the first mount over them.
func (pl *protectPlan) make() error {
	for _, d := range pl.makeDirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("sandbox: make the protected directory %q: %w", d, err)
		}
	}
	for _, f := range pl.makeFiles {
		fd, err := os.OpenFile(f, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("sandbox: make the protected file %q: %w", f, err)
		}
		if fd != nil {
			fd.Close()
		}
	}
	return nil
}

// gitWalk finds git repositories beneath the roots, within the bounds.
type gitWalk struct {
	deadline time.Time
	skip     func(string) bool
	entries  int
	found    []protectedPath
	cut      string // the bound that stopped the walk
	err      error
}

func (w *gitWalk) walk(root string) {
	type dir struct {
		path  string
		depth int
	}
	stack := []dir{{root, 0}}
	for len(stack) > 0 && w.cut == "" && w.err == nil {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if time.Now().After(w.deadline) {
			w.cut = fmt.Sprintf("the walk for git repositories took longer than %v", maxGitWalkTime)
			return
		}
		entries, err := os.ReadDir(d.path)
		if err != nil {
			w.unreadable(d.path, err)
			continue
		}
		w.entries += len(entries)
		if w.entries > maxGitWalkEntries {
			w.cut = fmt.Sprintf("the walk for git repositories met more than %d entries", maxGitWalkEntries)
			return
		}
		for _, e := range entries {
			p := filepath.Join(d.path, e.Name())
			if e.Name() == ".git" {
				w.repo(d.path, e)
				continue
			}
			if !e.IsDir() || w.skip(p) {
				continue
			}
			if d.depth+1 > maxGitWalkDepth {
				w.cut = fmt.Sprintf("the walk for git repositories went deeper than %d directories at %q", maxGitWalkDepth, p)
				return
			}
			stack = append(stack, dir{p, d.depth + 1})
		}
	}
}

// unreadable decides on a directory the walk could not list. A missing one
// holds nothing. One this user owns may have been made unreadable by a
// tool of an earlier session (modes are not the sandbox's to govern), which
// could make it readable again and plant a hook in a repository beneath:
// the session is refused. One another user owns is as closed to tools as it
// is to the walk.
func (w *gitWalk) unreadable(dir string, err error) {
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var st syscall.Stat_t
	if serr := syscall.Lstat(dir, &st); serr == nil && int(st.Uid) != os.Geteuid() {
		return
	}
	if w.err == nil {
		w.err = fmt.Errorf("sandbox: list %q to find the git repositories to protect: %w; make it readable to its owner (chmod u+rx), or start the session where it is out of reach", dir, err)
	}
}

// repo records the protected parts of the repository whose ".git" entry e
// lies in the directory top.
func (w *gitWalk) repo(top string, e fs.DirEntry) {
	p := filepath.Join(top, ".git")
	switch {
	case e.Type()&fs.ModeSymlink != 0:
		w.err = fmt.Errorf("sandbox: the repository %q has a .git that is a symbolic link, which a tool could replace; make it a directory or a gitdir file, or start the session where it is out of reach", top)
	case e.IsDir():
		w.gitdir(p, 0)
	case e.Type().IsRegular():
		w.found = append(w.found, protectedPath{p, protectFile, ruleGit})
		g, ok := readGitPointer(p, "gitdir: ")
		if !ok {
			return
		}
		if !filepath.IsAbs(g) {
			g = filepath.Join(top, g)
		}
		g = filepath.Clean(g)
		c, ok := readGitPointer(filepath.Join(g, "commondir"), "")
		if !ok {
			w.gitdir(g, 0) // a submodule's or a separate gitdir
			return
		}
		// A linked worktree: its own gitdir holds its config.worktree and
		// the pointers back; hooks and config are the common directory's.
		if !filepath.IsAbs(c) {
			c = filepath.Join(g, c)
		}
		for _, name := range []string{"commondir", "gitdir", "config.worktree"} {
			w.found = append(w.found, protectedPath{filepath.Join(g, name), protectExisting, ruleGit})
		}
		w.gitdir(filepath.Clean(c), 0)
	}
}

// gitdir records a gitdir's hooks, config and config.worktree, those of
// its linked worktrees' gitdirs (worktrees/*: config.worktree and the
// pointers back), and those of the submodules' gitdirs beneath modules/.
// git reads a config.worktree only when the config sets
// extensions.worktreeConfig, so a missing one is made empty only then.
func (w *gitWalk) gitdir(g string, depth int) {
	w.found = append(w.found,
		protectedPath{filepath.Join(g, "hooks"), protectTree, ruleGit},
		protectedPath{filepath.Join(g, "config"), protectGitConfig, ruleGit})
	wtConfig := protectExisting
	if worktreeConfig(filepath.Join(g, "config")) {
		wtConfig = protectGitConfig
	}
	w.found = append(w.found, protectedPath{filepath.Join(g, "config.worktree"), wtConfig, ruleGit})
	if entries, err := os.ReadDir(filepath.Join(g, "worktrees")); err != nil {
		w.unreadable(filepath.Join(g, "worktrees"), err)
	} else {
		w.entries += len(entries)
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			wt := filepath.Join(g, "worktrees", e.Name())
			w.found = append(w.found,
				protectedPath{filepath.Join(wt, "config.worktree"), wtConfig, ruleGit},
				protectedPath{filepath.Join(wt, "commondir"), protectExisting, ruleGit},
				protectedPath{filepath.Join(wt, "gitdir"), protectExisting, ruleGit})
		}
	}
	w.modules(filepath.Join(g, "modules"), depth)
}

// worktreeConfig reports whether the git config at p may set
// extensions.worktreeConfig: it names it, or is too long to read whole.
func worktreeConfig(p string) bool {
	f, err := os.OpenFile(p, os.O_RDONLY|openNoWait, 0) // a FIFO a tool planted does not hold the walk
	if err != nil {
		return false // none: git reads no config.worktree either
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxGitConfigBytes+1))
	return err != nil || len(data) > maxGitConfigBytes || bytes.Contains(bytes.ToLower(data), []byte("worktreeconfig"))
}

// modules finds the gitdirs beneath a modules/ directory: those holding a
// HEAD, their names possibly nested.
func (w *gitWalk) modules(dir string, depth int) {
	if depth > maxGitWalkDepth {
		w.cut = fmt.Sprintf("the walk for git submodules went deeper than %d directories at %q", maxGitWalkDepth, dir)
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		w.unreadable(dir, err)
		return
	}
	w.entries += len(entries)
	for _, e := range entries {
		if !e.IsDir() || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if _, err := os.Lstat(filepath.Join(p, "HEAD")); err == nil {
			w.gitdir(p, depth+1)
		} else {
			w.modules(p, depth+1)
		}
	}
}

// readGitPointer reads a small file of git's that names another path,
// after prefix; ok false when it is missing or not of that form.
func readGitPointer(p, prefix string) (string, bool) {
	f, err := os.OpenFile(p, os.O_RDONLY|openNoWait, 0) // a FIFO a tool planted does not hold the walk
	if err != nil {
		return "", false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxGitFileBytes))
	if err != nil {
		return "", false
	}
	return parseGitPointer(data, prefix)
}

// parseGitPointer reads the path in the first line of a git pointer file
// after prefix: what git itself reads, trailing blanks and CR dropped.
func parseGitPointer(data []byte, prefix string) (string, bool) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	s, ok := strings.CutPrefix(strings.TrimRight(string(line), "\r "), prefix)
	if !ok || s == "" {
		return "", false
	}
	return s, true
}

// protectedRule returns the rule that protects the real path p from the
// built-in file tools, "" when none does: a protected tree or file of the
// plan, a dot entry of a protected directory, and, whatever the walk
// found, anything at a git hooks directory or config beneath a ".git".
func (pl *protectPlan) protectedRule(p string) string {
	// The most specific rule first: a settings file in the home directory
	// is named as settings, not as a dot entry.
	for _, pp := range pl.Paths {
		switch pp.Kind {
		case protectTree, protectPath:
			if pathUnder(p, pp.Path) {
				return pp.Rule
			}
		case protectFile, protectGitConfig, protectExisting:
			if p == pp.Path {
				return pp.Rule
			}
		}
	}
	for _, pp := range pl.Paths {
		if rest, ok := strings.CutPrefix(p, pp.Path+"/"); ok && pp.Kind == protectDotEntries && strings.HasPrefix(rest, ".") {
			return pp.Rule
		}
	}
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if part != ".git" {
			continue
		}
		for j := i + 1; j < len(parts); j++ {
			if parts[j] == "hooks" || j == len(parts)-1 && (parts[j] == "config" || parts[j] == "config.worktree") {
				return ruleGit
			}
		}
	}
	return ""
}

// protectedPathError is a built-in file tool's refusal of a protected path.
type protectedPathError struct {
	tool, path, rule string
}

func (e *protectedPathError) Error() string {
	fix := "change it outside the agent"
	if e.rule == ruleOperator {
		fix = "drop it from --" + flagSandboxProtect + " or " + keySandboxProtect + ", or change it outside the agent"
	}
	return fmt.Sprintf("%s %q: protected path (%s); no tool may change what acpguard or the user's own programs trust: %s", e.tool, e.path, e.rule, fix)
}

// protectGuard returns the check a built-in file tool makes of the real
// path it is about to write for p (shown in the error): a refusal when the
// session's sandbox protects it, nil otherwise. Off, it allows everything,
// as the sandbox does.
func protectGuard(env *toolEnv, tool, p string) func(real string) error {
	sb := env.Sandbox
	if sb == nil || sb.protect == nil {
		return func(string) error { return nil }
	}
	return func(real string) error {
		if rule := sb.protect.protectedRule(real); rule != "" {
			return &protectedPathError{tool, p, rule}
		}
		return nil
	}
}
