// config_completion.go extends the configuration group with "acpguard
// completion bash|zsh|fish": shell completion of the subcommands and their
// flags, read from the same usage texts --help prints, so that a flag is
// completed exactly where --help lists it.
package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

const completionUsage = `Usage: acpguard completion bash|zsh|fish

Prints the shell completion script of the subcommands and their flags.
Install it:
  bash:  acpguard completion bash > ~/.local/share/bash-completion/completions/acpguard
  zsh:   acpguard completion zsh > "${fpath[1]}/_acpguard"
  fish:  acpguard completion fish > ~/.config/fish/completions/acpguard.fish
`

// completionShells are the shells "acpguard completion" writes for.
var completionShells = []string{"bash", "zsh", "fish"}

// completedCommands are the subcommands completed, each with the usage
// text its flags are read from; "provider check" completes after
// "provider".
func completedCommands() []struct{ name, usage string } {
	return []struct{ name, usage string }{
		{"serve", serveUsage}, {"acp", acpUsage}, {"run", runUsage}, {"provider", providerUsage},
		{"provider check", providerCheckUsage}, {"demo", demoUsage}, {"log", logUsage}, {"doctor", doctorUsage},
		{"completion", completionUsage}, {"version", ""}, {"help", ""},
	}
}

// usageFlagLine finds the lines of a usage text that list flags: indented,
// a flag first, more after ", " ("--tls-cert FILE, --tls-key FILE").
var (
	usageFlagLine = regexp.MustCompile(`(?m)^\s+--[a-z0-9].*$`)
	usageFlag     = regexp.MustCompile(`(?:^\s+|, )(--[a-z0-9][a-z0-9-]*)`)
)

// usageFlags lists the flags of a usage text, sorted, once each, with --help.
func usageFlags(usage string) []string {
	flags := []string{"--help"}
	for _, line := range usageFlagLine.FindAllString(usage, -1) {
		for _, m := range usageFlag.FindAllStringSubmatch(line, -1) {
			if !slices.Contains(flags, m[1]) {
				flags = append(flags, m[1])
			}
		}
	}
	slices.Sort(flags)
	return flags
}

// runCompletion is "acpguard completion".
func runCompletion(sys *system, args []string) error {
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		fmt.Fprint(sys.stdout, completionUsage)
		return errHelp
	}
	if len(args) != 1 || !slices.Contains(completionShells, args[0]) {
		return usagef(`completion %q: want one of %s; run "acpguard completion --help"`, strings.Join(args, " "), strings.Join(completionShells, ", "))
	}
	var b strings.Builder
	switch args[0] {
	case "bash":
		writeBashCompletion(&b)
	case "zsh":
		b.WriteString("#compdef acpguard\n# acpguard completion zsh: the bash completion through bashcompinit.\nautoload -U +X bashcompinit && bashcompinit\n")
		writeBashCompletion(&b)
	case "fish":
		writeFishCompletion(&b)
	}
	_, err := fmt.Fprint(sys.stdout, b.String())
	return err
}

func writeBashCompletion(b *strings.Builder) {
	var top []string
	b.WriteString("# acpguard completion bash\n_acpguard() {\n")
	b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]} words\n")
	b.WriteString("\tif [[ $cmd == provider && ${COMP_WORDS[2]} == check ]]; then cmd=\"provider check\"; fi\n")
	b.WriteString("\tcase $cmd in\n")
	for _, c := range completedCommands() {
		if !strings.Contains(c.name, " ") {
			top = append(top, c.name)
		}
		words := usageFlags(c.usage)
		switch c.name {
		case "provider":
			words = append(words, "check")
		case "completion":
			words = completionShells
		}
		fmt.Fprintf(b, "\t%q) words=%q ;;\n", c.name, strings.Join(words, " "))
	}
	fmt.Fprintf(b, "\t*) words=%q ;;\n\tesac\n", strings.Join(top, " "))
	b.WriteString("\tif [[ $COMP_CWORD -eq 1 ]]; then words=\"" + strings.Join(top, " ") + "\"; fi\n")
	b.WriteString("\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}\ncomplete -o default -F _acpguard acpguard\n")
}

func writeFishCompletion(b *strings.Builder) {
	b.WriteString("# acpguard completion fish\n")
	var top []string
	for _, c := range completedCommands() {
		if !strings.Contains(c.name, " ") {
			top = append(top, c.name)
		}
	}
	fmt.Fprintf(b, "complete -c acpguard -f -n __fish_use_subcommand -a %q\n", strings.Join(top, " "))
	for _, c := range completedCommands() {
		cond := "__fish_seen_subcommand_from " + c.name
		if c.name == "provider check" {
			cond = "__fish_seen_subcommand_from check"
		} else if c.name == "provider" {
			cond = "__fish_seen_subcommand_from provider; and not __fish_seen_subcommand_from check"
			fmt.Fprintf(b, "complete -c acpguard -f -n %q -a check\n", cond)
		} else if c.name == "completion" {
			fmt.Fprintf(b, "complete -c acpguard -f -n %q -a %q\n", cond, strings.Join(completionShells, " "))
		}
		for _, f := range usageFlags(c.usage) {
			fmt.Fprintf(b, "complete -c acpguard -n %q -l %s\n", cond, strings.TrimPrefix(f, "--"))
		}
	}
}
