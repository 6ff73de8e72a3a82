// provider_limits.go owns what a provider policy rule adds to its tool and
// arguments: the check of its tool name at load, its budget ("limit",
// "limitKey") with the bounded in-memory counters behind it, and its time
// window ("hours", "days", "timezone").
package main

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// providerCall is one call as the policy sees it: the tool, its final
// arguments, the session it belongs to (the key of per-session budgets) and
// the time it is decided at (windows and budgets; injected, never read from
// the wall clock here).
type providerCall struct {
	Tool    string
	Args    any
	Session string
	At      time.Time
}

// providerRuleTool is a rule's "tool" resolved at load: the names it
// matches exactly, or a glob.
type providerRuleTool struct {
	names []string // exact names: the canonical names an alias stands for, and the name as written
	glob  bool
}

// providerAliasNames are the settings file's tool aliases a rule may name
// (perms.go ruleToolNames resolves them), offered by "did you mean".
var providerAliasNames = []string{"Bash", "Shell", "Read", "Edit", "Write", "Grep", "Glob", "replace", "search_file_content"}

// providerToolNames are the canonical names of this runtime's tools, as
// the settings file's aliases resolve them: the provider uses nothing of
// the tools themselves.
func providerToolNames() []string {
	var names []string
	for _, alias := range []string{"Read", "Edit", "Bash"} {
		tools, _ := ruleToolNames(alias)
		for _, n := range tools {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names
}

// compileProviderTool checks a rule's tool name (DESIGN.md §11): a
// canonical name, an alias of the settings file, an mcp__server__tool name,
// or a glob matching one of the tools or only MCP names. A Qwen Code tool
// this runtime lacks is accepted with a warning (Qwen Code may still send
// it); anything else is refused with the nearest known name.
func compileProviderTool(name string) (t providerRuleTool, warning string, err error) {
	if name == "" {
		return t, "", errors.New(`missing "tool"`)
	}
	if t.glob = strings.ContainsAny(name, `*?[\`); t.glob {
		if _, err := path.Match(name, ""); err != nil {
			return t, "", fmt.Errorf("invalid tool pattern %q: %w", name, err)
		}
		for _, n := range providerToolNames() {
			if ok, _ := path.Match(name, n); ok {
				return t, "", nil
			}
		}
		if strings.HasPrefix(name, "mcp__") {
			return t, "", nil
		}
		for _, n := range qwenOnlyTools {
			if ok, _ := path.Match(name, n); ok {
				return t, fmt.Sprintf("tool pattern %q matches only Qwen Code tools acpguard does not have", name), nil
			}
		}
		return t, "", fmt.Errorf("tool pattern %q matches no tool: want a tool name (%s), a glob over them, or an mcp__server__tool pattern", name, strings.Join(providerToolNames(), ", "))
	}
	if names, ok := ruleToolNames(name); ok {
		t.names = append(names, name)
		if canonical, foreign := qwenOnlyTools[name]; foreign {
			return t, fmt.Sprintf("tool %q (%s) is a Qwen Code tool acpguard does not have: the rule matches only calls from another client", name, canonical), nil
		}
		return t, "", nil
	}
	if server, tool, ok := strings.Cut(strings.TrimPrefix(name, "mcp__"), "__"); strings.HasPrefix(name, "mcp__") {
		if ok && server != "" && tool != "" {
			t.names = []string{name}
			return t, "", nil
		}
		return t, "", fmt.Errorf("tool %q: an MCP tool is named mcp__<server>__<tool>; for every tool of a server write %q", name, strings.TrimSuffix(name, "__")+"__*")
	}
	candidates := slices.Concat(providerToolNames(), providerAliasNames)
	for n := range qwenOnlyTools {
		candidates = append(candidates, n)
	}
	slices.Sort(candidates) // map order must not pick among equals
	msg := fmt.Sprintf("unknown tool %q", name)
	if near := closestKey(name, candidates); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return t, "", errors.New(msg)
}

func (t *providerRuleTool) matches(pattern, toolName string) bool {
	if t.glob {
		ok, _ := path.Match(pattern, toolName)
		return ok
	}
	return slices.Contains(t.names, toolName)
}

// Budget state is in memory, per policy (a reload starts afresh), and
// bounded: at most maxProviderLimitKeys counters over all rules. When a new
// key finds the table full, windows that have ended are dropped; if none
// has, the counter whose window ends first is dropped (it is the one
// nearest to being reset anyway).
const maxProviderLimitKeys = 10000

// maxProviderLimitCount bounds N in "N/unit".
const maxProviderLimitCount = 1_000_000

// providerLimitUnits are the periods a budget may name.
var providerLimitUnits = map[string]time.Duration{
	"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour,
}

// providerLimit is a rule's budget: at most count calls per period, counted
// per key (session, tool or the whole rule) in fixed windows that start
// with the first call of a key.
type providerLimit struct {
	raw    string // as written, for reasons
	count  int
	period time.Duration
	key    string // "session", "tool" or "global"
}

func compileProviderLimit(limit, key string, allow bool) (*providerLimit, error) {
	if limit == "" {
		if key != "" {
			return nil, fmt.Errorf(`limitKey %q without "limit"`, key)
		}
		return nil, nil
	}
	if !allow {
		return nil, fmt.Errorf(`limit %q on a deny rule: a deny refuses every call already; put the limit on the allow rule`, limit)
	}
	n, unit, _ := strings.Cut(limit, "/")
	count, err := strconv.Atoi(n)
	period, ok := providerLimitUnits[unit]
	if err != nil || !ok || count < 1 || count > maxProviderLimitCount || n[0] == '+' {
		return nil, fmt.Errorf(`limit %q: want N/second, N/minute, N/hour or N/day, N from 1 to %d`, limit, maxProviderLimitCount)
	}
	switch key {
	case "":
		key = "session"
	case "session", "tool", "global":
	default:
		return nil, fmt.Errorf(`limitKey %q: want "session", "tool" or "global"`, key)
	}
	return &providerLimit{raw: limit, count: count, period: period, key: key}, nil
}

// providerBudgets holds the counters of one policy's budgets.
type providerBudgets struct {
	mu   sync.Mutex
	keys map[providerBudgetKey]*providerBudgetWindow
}

type providerBudgetKey struct {
	rule int
	key  string // session id, tool name, or "" for global
}

type providerBudgetWindow struct {
	end   time.Time
	count int
}

// take counts one call of rule against its budget at time at. When the
// budget is spent it counts nothing and returns how long until the window
// ends.
func (b *providerBudgets) take(rule int, l *providerLimit, call *providerCall) (ok bool, wait time.Duration) {
	k := providerBudgetKey{rule: rule}
	switch l.key {
	case "session":
		k.key = call.Session
	case "tool":
		k.key = call.Tool
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.keys[k]
	if w != nil && !call.At.Before(w.end) {
		w = nil
	}
	if w == nil {
		if b.keys == nil {
			b.keys = make(map[providerBudgetKey]*providerBudgetWindow)
		}
		if _, present := b.keys[k]; !present && len(b.keys) >= maxProviderLimitKeys {
			b.evict(call.At)
		}
		w = &providerBudgetWindow{end: call.At.Add(l.period)}
		b.keys[k] = w
	}
	if w.count >= l.count {
		return false, w.end.Sub(call.At)
	}
	w.count++
	return true, 0
}

// evict makes room for one key: every ended window, or else the one that
// ends first.
func (b *providerBudgets) evict(now time.Time) {
	var first providerBudgetKey
	var firstEnd time.Time
	for k, w := range b.keys {
		if !now.Before(w.end) {
			delete(b.keys, k)
			continue
		}
		if firstEnd.IsZero() || w.end.Before(firstEnd) {
			first, firstEnd = k, w.end
		}
	}
	if len(b.keys) >= maxProviderLimitKeys {
		delete(b.keys, first)
	}
}

// limitReason is the denial of a call over a budget: which budget, whose,
// and when the next call can pass (whole seconds, rounded up).
func limitReason(rule int, l *providerLimit, wait time.Duration) string {
	secs := int64((wait + time.Second - 1) / time.Second)
	per := ""
	switch l.key {
	case "tool":
		per = " for this tool"
	case "global":
		per = " for all sessions"
	}
	return fmt.Sprintf("rate limit %s of rule %d reached%s; try again in %ds", l.raw, rule, per, secs)
}

// providerWindow is a rule's time window: the rule matches only at a time
// of day within hours (start inclusive, end exclusive; an end before the
// start runs over midnight) on one of days, in the zone given (the
// provider's local zone when absent). The day is that of the call's time.
type providerWindow struct {
	hours      string // as written; "" for all day
	start, end int    // minutes after midnight
	days       []string
	dayMask    uint8 // bit time.Weekday; 0 for every day
	loc        *time.Location
	zone       string // as written; "" for local time
}

var providerDayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

func compileProviderWindow(hours string, days []string, zone string) (*providerWindow, error) {
	if hours == "" && days == nil {
		if zone != "" {
			return nil, fmt.Errorf(`timezone %q without "hours" or "days"`, zone)
		}
		return nil, nil
	}
	w := &providerWindow{hours: hours, days: days, zone: zone, loc: time.Local}
	if hours != "" {
		from, to, _ := strings.Cut(hours, "-")
		var err1, err2 error
		w.start, err1 = parseClockMinutes(from, false)
		w.end, err2 = parseClockMinutes(to, true)
		if err1 != nil || err2 != nil || w.start == w.end {
			return nil, fmt.Errorf(`hours %q: want HH:MM-HH:MM, 24-hour, start and end different, such as "09:00-18:00" or "22:00-06:00"`, hours)
		}
	}
	if days != nil && len(days) == 0 {
		return nil, errors.New(`days []: name at least one day, or leave "days" out for every day`)
	}
	for _, d := range days {
		i := slices.Index(providerDayNames, d)
		if i < 0 {
			return nil, fmt.Errorf(`days: %q is not a day: want %s`, d, strings.Join(providerDayNames, ", "))
		}
		w.dayMask |= 1 << i
	}
	if zone != "" {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			return nil, fmt.Errorf("timezone %q: unknown time zone (want an IANA name such as \"Europe/Berlin\")", zone)
		}
		w.loc = loc
	}
	return w, nil
}

// parseClockMinutes reads HH:MM; "24:00" only as an end.
func parseClockMinutes(s string, end bool) (int, error) {
	if len(s) != 5 || s[2] != ':' {
		return 0, errors.New("not HH:MM")
	}
	h, err1 := strconv.Atoi(s[:2])
	m, err2 := strconv.Atoi(s[3:])
	if err1 != nil || err2 != nil || s[0] == '+' || s[3] == '+' || h < 0 || m < 0 || m > 59 || h > 24 || (h == 24 && (m != 0 || !end)) {
		return 0, errors.New("not HH:MM")
	}
	return h*60 + m, nil
}

// contains reports whether t is inside the window.
func (w *providerWindow) contains(t time.Time) bool {
	t = t.In(w.loc)
	if w.dayMask != 0 && w.dayMask&(1<<t.Weekday()) == 0 {
		return false
	}
	if w.hours == "" {
		return true
	}
	m := t.Hour()*60 + t.Minute()
	if w.start < w.end {
		return m >= w.start && m < w.end
	}
	return m >= w.start || m < w.end
}

// String renders the window for reasons and messages.
func (w *providerWindow) String() string {
	var parts []string
	if w.hours != "" {
		parts = append(parts, w.hours)
	}
	if w.days != nil {
		parts = append(parts, strings.Join(w.days, ","))
	}
	if w.zone != "" {
		parts = append(parts, w.zone)
	}
	return strings.Join(parts, " ")
}

// windowReason is the denial of a call the default refused when an allow
// rule would have matched it inside its window.
func windowReason(rule int, w *providerWindow) string {
	return fmt.Sprintf("outside the time window of rule %d (%s), which allows this call", rule, w)
}
