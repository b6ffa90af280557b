package cli

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/models"
)

// Shell completion. The scripts are small and the same for every version of
// the command tree: at each Tab they run the hidden `ctx __complete words --
// WORDS...`, which walks the kong model (commands, flags, positionals) and
// reads agent and session names from CTX_ROOT. One implementation serves
// bash, zsh and fish, and it is tested in Go.

// ComplCmd is `ctx completion bash|zsh|fish`.
type ComplCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"bash, zsh or fish."`
}

// Help is the long help of `ctx completion --help`.
func (c *ComplCmd) Help() string {
	return `Completes commands, flags, agent names (from $CTX_ROOT/agent), session names
(from the agent's sessions), control files and models.

Examples:
  source <(ctx completion bash)                 # bash, this shell
  ctx completion zsh > "${fpath[1]}/_ctx"       # zsh
  ctx completion fish > ~/.config/fish/completions/ctx.fish`
}

func (c *ComplCmd) Run(env *Env, k *kong.Context) error {
	name := k.Model.Name
	var script string
	switch c.Shell {
	case "bash":
		script = bashScript
	case "zsh":
		script = zshScript
	case "fish":
		script = fishScript
	}
	_, err := io.WriteString(env.Stdout, strings.ReplaceAll(script, "@CTX@", name))
	return err
}

// CandsCmd is the hidden `ctx __complete` the scripts call.
type CandsCmd struct {
	Agents   CompleteAgentsCmd   `cmd:"" help:"Print agent names. Example: ctx __complete agents"`
	Sessions CompleteSessionsCmd `cmd:"" help:"Print the session names of an agent. Example: ctx __complete sessions demo"`
	Words    CompleteWordsCmd    `cmd:"" help:"Print the completions of a command line, one per line (value TAB help). Example: ctx __complete words -- agent send ''"`
}

// CompleteAgentsCmd is `ctx __complete agents`.
type CompleteAgentsCmd struct{}

func (c *CompleteAgentsCmd) Run(env *Env) error {
	return printCands(env.Stdout, agentCands(env.Layout), "")
}

// CompleteSessionsCmd is `ctx __complete sessions AGENT`.
type CompleteSessionsCmd struct {
	Agent string `arg:"" help:"Agent name."`
	Scope string `default:"private" enum:"private,shared" help:"private or shared."`
}

func (c *CompleteSessionsCmd) Run(env *Env) error {
	return printCands(env.Stdout, sessionCands(env.Layout, c.Agent, c.Scope), "")
}

// CompleteWordsCmd is `ctx __complete words -- WORD... CURRENT`.
type CompleteWordsCmd struct {
	Words []string `arg:"" optional:"" passthrough:"" help:"The words after the program name; the last is the one being completed."`
}

func (c *CompleteWordsCmd) Run(env *Env, k *kong.Context) error {
	words := c.Words
	if len(words) > 0 && words[0] == "--" {
		words = words[1:]
	}
	cands, directive := complete(k.Model.Node, env.Layout, words)
	return printCands(env.Stdout, cands, directive)
}

type cand struct{ value, help string }

func printCands(w io.Writer, cs []cand, directive string) error {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.value)
		if c.help != "" {
			b.WriteString("\t" + oneLine(c.help))
		}
		b.WriteString("\n")
	}
	if directive != "" {
		b.WriteString(directive + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// oneLine is a help text's first sentence, without its "Example:" part.
func oneLine(s string) string {
	if i := strings.Index(s, " Example:"); i >= 0 {
		s = s[:i]
	}
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "\t", " ")
	return strings.TrimSpace(s)
}

// Directives after the candidates: let the shell complete file or
// directory names.
const (
	dirFiles = ":files"
	dirDirs  = ":dirs"
)

// complete returns the candidates for the last of words (the words after
// the program name; bash splits "--flag=value" at "=", so an "=" word is
// joined back to its flag) and, when paths fit, a directive.
func complete(app *kong.Node, l layout.Layout, words []string) ([]cand, string) {
	words = joinEquals(words)
	if len(words) == 0 {
		words = []string{""}
	}
	cur := words[len(words)-1]
	node := app
	var pos []string
	flagVals := map[string]string{}
	dashdash := false
	var pending *kong.Flag // a flag waiting for its value
	for _, w := range words[:len(words)-1] {
		switch {
		case pending != nil:
			flagVals[pending.Name] = w
			pending = nil
		case dashdash:
			pos = append(pos, w)
		case w == "--":
			dashdash = true
		case strings.HasPrefix(w, "-") && len(w) > 1:
			name, val, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
			f := findFlag(node, name, w)
			if f == nil {
				continue
			}
			if hasVal {
				flagVals[f.Name] = val
			} else if !f.IsBool() && !f.IsCounter() {
				pending = f
			}
		default:
			if len(pos) == 0 {
				if child := findChild(node, w); child != nil {
					node = child
					continue
				}
			}
			pos = append(pos, w)
		}
	}
	ctx := compCtx{l: l, node: node, pos: pos, flagVals: flagVals}
	switch {
	case pending != nil:
		return ctx.values(pending.Value, cur, "")
	case !dashdash && strings.HasPrefix(cur, "--") && strings.Contains(cur, "="):
		name, val, _ := strings.Cut(cur[2:], "=")
		if f := findFlag(node, name, "--"+name); f != nil && !f.IsBool() {
			return ctx.values(f.Value, val, "--"+name+"=")
		}
		return nil, ""
	case !dashdash && strings.HasPrefix(cur, "-"):
		var out []cand
		for _, group := range node.AllFlags(true) {
			for _, f := range group {
				out = append(out, cand{"--" + f.Name, f.Help})
			}
		}
		return filter(out, cur), ""
	}
	if len(pos) == 0 && !dashdash {
		var out []cand
		for _, ch := range node.Children {
			if ch.Hidden || ch.Type != kong.CommandNode {
				continue
			}
			out = append(out, cand{ch.Name, ch.Help})
		}
		if len(out) > 0 {
			return filter(out, cur), ""
		}
	}
	if n := len(node.Positional); n > 0 {
		i := len(pos)
		if i >= n {
			if !node.Positional[n-1].IsCumulative() {
				return nil, ""
			}
			i = n - 1
		}
		if node.Positional[i].Passthrough && !dashdash && i > 0 {
			return nil, ""
		}
		return ctx.values(node.Positional[i], cur, "")
	}
	return nil, ""
}

// joinEquals undoes bash's split of "--flag=value" into "--flag", "=", "value".
func joinEquals(words []string) []string {
	out := make([]string, 0, len(words))
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "=" && len(out) > 0 && strings.HasPrefix(out[len(out)-1], "--") && !strings.Contains(out[len(out)-1], "=") {
			out[len(out)-1] += "="
			if i+1 < len(words) {
				out[len(out)-1] += words[i+1]
				i++
			}
			continue
		}
		out = append(out, w)
	}
	return out
}

func findFlag(node *kong.Node, name, word string) *kong.Flag {
	short := !strings.HasPrefix(word, "--") && len(name) == 1
	for _, group := range node.AllFlags(false) {
		for _, f := range group {
			if (!short && f.Name == name) || (short && f.Short == rune(name[0])) {
				return f
			}
			for _, a := range f.Aliases {
				if !short && a == name {
					return f
				}
			}
		}
	}
	return nil
}

func findChild(node *kong.Node, w string) *kong.Node {
	for _, ch := range node.Children {
		if ch.Type != kong.CommandNode {
			continue
		}
		if ch.Name == w {
			return ch
		}
		for _, a := range ch.Aliases {
			if a == w {
				return ch
			}
		}
	}
	return nil
}

func filter(cs []cand, prefix string) []cand {
	var out []cand
	for _, c := range cs {
		if strings.HasPrefix(c.value, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// compCtx is what a value completion may depend on: the command, the
// positionals before it and the flags given so far.
type compCtx struct {
	l        layout.Layout
	node     *kong.Node
	pos      []string
	flagVals map[string]string
}

// agent is the agent the command line names: the first positional of an
// agent or terminal command.
func (c compCtx) agent() string {
	for i, p := range c.node.Positional {
		if i < len(c.pos) && (p.Name == "name" || p.Name == "agent") {
			return c.pos[i]
		}
	}
	return ""
}

func (c compCtx) agentCommand() bool {
	for n := c.node; n != nil; n = n.Parent {
		if n.Parent != nil && n.Parent.Parent == nil {
			return n.Name == "agent" || n.Name == "terminal" || n.Name == "__complete"
		}
	}
	return false
}

// values completes one value: prefix is put back in front of each candidate
// (a "--flag=" being completed as one word).
func (c compCtx) values(v *kong.Value, cur, prefix string) ([]cand, string) {
	var out []cand
	list := func(vals ...string) {
		for _, s := range vals {
			out = append(out, cand{value: s})
		}
	}
	commaList := false
	switch {
	case v.Enum != "":
		list(v.EnumSlice()...)
	case v.Name == "session":
		scope := c.flagVals["scope"]
		if scope == "" {
			scope = layout.ScopePrivate
		}
		if a := c.agent(); a != "" {
			out = sessionCands(c.l, a, scope)
		}
	case (v.Name == "name" || v.Name == "agent") && c.agentCommand():
		out = agentCands(c.l)
	case v.Name == "control":
		list(agentdef.Controls...)
	case v.Name == "value" && len(c.pos) >= 2:
		switch c.pos[1] {
		case "approval":
			list("auto", "ask")
		case "window":
			list("auto")
		case "abi":
			list(agentdef.ABIs...)
		}
	case v.Name == "model":
		commaList = true
		out = modelCands(c.l)
	case v.Name == "tools":
		commaList = true
		out = toolCands(c.l)
	case v.Name == "exec" || v.Name == "bin":
		return nil, dirFiles
	case v.Name == "cwd" || v.Name == "dir":
		return nil, dirDirs
	case v.Tag != nil && (v.Tag.Type == "path" || v.Tag.Type == "existingfile"):
		return nil, dirFiles
	}
	head := ""
	if commaList {
		if i := strings.LastIndexByte(cur, ','); i >= 0 {
			head, cur = cur[:i+1], cur[i+1:]
		}
	}
	out = filter(out, cur)
	for i := range out {
		out[i].value = prefix + head + out[i].value
	}
	return out, ""
}

func agentCands(l layout.Layout) []cand {
	names, _ := agentdef.List(l)
	var out []cand
	for _, n := range names {
		out = append(out, cand{value: n})
	}
	return out
}

func sessionCands(l layout.Layout, agent, scope string) []cand {
	if layout.CheckName("agent", agent) != nil {
		return nil
	}
	ents, _ := os.ReadDir(l.SessionsDir(agent, scope))
	var out []cand
	for _, e := range ents {
		if e.IsDir() && layout.CheckName("session", e.Name()) == nil {
			out = append(out, cand{value: e.Name()})
		}
	}
	return out
}

func modelCands(l layout.Layout) []cand {
	t, err := models.Load(l.Root)
	if err != nil {
		t = models.Builtin()
	}
	var out []cand
	for _, e := range t.Entries() {
		out = append(out, cand{e.Model, fmt.Sprintf("%d tokens", e.Tokens)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].value < out[j].value })
	return out
}

func toolCands(l layout.Layout) []cand {
	seen := map[string]bool{}
	var out []cand
	for _, d := range []string{l.ToolDir(), l.UserToolDir()} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.Type().IsRegular() && layout.CheckName("tool", e.Name()) == nil && !seen[e.Name()] {
				seen[e.Name()] = true
				out = append(out, cand{value: e.Name()})
			}
		}
	}
	return out
}

// The scripts. @CTX@ is the program name. Each one hands the words up to
// the cursor to `@CTX@ __complete words --` and turns its lines (value TAB
// help, or a :files / :dirs directive) into the shell's candidates.

const bashScript = `# bash completion for @CTX@ (generated by "@CTX@ completion bash")
_@CTX@_complete() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local IFS=$'\n' line out eq=
    [[ $cur == "=" || $prev == "=" ]] && eq=1
    [[ $cur == "=" ]] && cur=
    out=$("${COMP_WORDS[0]}" __complete words -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) || return 0
    COMPREPLY=()
    for line in $out; do
        case $line in
        :files) compopt -o filenames 2>/dev/null; COMPREPLY+=($(compgen -f -- "$cur")) ;;
        :dirs) compopt -o filenames 2>/dev/null; COMPREPLY+=($(compgen -d -- "$cur")) ;;
        *)
            line=${line%%$'\t'*}
            [[ -n $eq && $line == --*=* ]] && line=${line#*=}
            COMPREPLY+=("$line") ;;
        esac
    done
}
complete -F _@CTX@_complete @CTX@
`

const zshScript = `#compdef @CTX@
# zsh completion for @CTX@ (generated by "@CTX@ completion zsh")
_@CTX@() {
    local -a cands
    local line out
    out=$("${words[1]}" __complete words -- "${(@)words[2,CURRENT]}" 2>/dev/null) || return 1
    for line in "${(@f)out}"; do
        case $line in
        :files) _files ;;
        :dirs) _files -/ ;;
        '') ;;
        *) line=${line//:/\\:}; cands+=("${line/$'\t'/:}") ;;
        esac
    done
    (( ${#cands} )) && _describe -t values '@CTX@' cands
    return 0
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _@CTX@ "$@"
else
    compdef _@CTX@ @CTX@
fi
`

const fishScript = `# fish completion for @CTX@ (generated by "@CTX@ completion fish")
function __@CTX@_complete
    set -l tokens (commandline -opc)
    set -l prog $tokens[1]
    set -e tokens[1]
    set -l cur (commandline -ct)
    for line in ($prog __complete words -- $tokens "$cur" 2>/dev/null)
        switch $line
            case :files
                __fish_complete_path "$cur"
            case :dirs
                __fish_complete_directories "$cur"
            case '*'
                echo $line
        end
    end
end
complete -c @CTX@ -f -a '(__@CTX@_complete)'
`
