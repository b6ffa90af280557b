package ctxd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/exitcode"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/provider"
)

// ProviderArgs is `ctx provider add|list|test` as ctx passes it to ctxd
// (which links the provider code: the ctx client stays free of net/http).
type ProviderArgs struct {
	Verb    string // add, list, test
	Name    string
	Type    string // add: anthropic or openai
	BaseURL string // add
	KeyEnv  string // add: the variable the daemon reads the key from
	NoKey   bool   // add: no key (a local server)
}

// ParseProviderArgs reads ctxd's `provider VERB [NAME] [--type T]
// [--base-url U] [--key-env V] [--no-key]`.
func ParseProviderArgs(args []string) (ProviderArgs, error) {
	var p ProviderArgs
	if len(args) == 0 {
		return p, errors.New("provider: want add, list or test")
	}
	p.Verb, args = args[0], args[1:]
	for len(args) > 0 {
		a := args[0]
		args = args[1:]
		val := func() (string, error) {
			if len(args) == 0 {
				return "", fmt.Errorf("provider: %s needs a value", a)
			}
			v := args[0]
			args = args[1:]
			return v, nil
		}
		var err error
		switch a {
		case "--type":
			p.Type, err = val()
		case "--base-url":
			p.BaseURL, err = val()
		case "--key-env":
			p.KeyEnv, err = val()
		case "--no-key":
			p.NoKey = true
		default:
			if strings.HasPrefix(a, "-") || p.Name != "" {
				return p, fmt.Errorf("provider: unexpected %q", a)
			}
			p.Name = a
		}
		if err != nil {
			return p, err
		}
	}
	return p, nil
}

// Provider runs `ctx provider VERB`.
func Provider(ctx context.Context, l layout.Layout, p ProviderArgs, stdin *os.File, stdout, stderr io.Writer) error {
	switch p.Verb {
	case "add":
		return providerAdd(l, p, stdin, stdout, stderr)
	case "list":
		return providerList(l, stdout)
	case "test":
		return providerTest(ctx, l, p.Name, stdout)
	}
	return usage(fmt.Errorf("provider: want add, list or test, not %q", p.Verb))
}

// providerAdd declares or changes a provider entry in providers.json (the
// fields given; the others kept) and stores its key, read from the
// terminal without echo or from stdin — never from argv — in the owner's
// secrets file (mode 0600). The file is checked by loading it before it
// replaces the old one.
func providerAdd(l layout.Layout, p ProviderArgs, stdin *os.File, stdout, stderr io.Writer) error {
	if err := layout.CheckName("provider", p.Name); err != nil {
		return usage(err)
	}
	if err := l.EnsureRoot(); err != nil {
		return err
	}
	path := filepath.Join(l.Root, provider.FileName)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	doc := map[string]any{}
	if len(old) > 0 {
		if err := json.Unmarshal(old, &doc); err != nil {
			return usage(fmt.Errorf("%s: %w (fix or remove it first)", path, err))
		}
	}
	provs, _ := doc["providers"].(map[string]any)
	if provs == nil {
		provs = map[string]any{}
	}
	entry, _ := provs[p.Name].(map[string]any)
	if entry == nil {
		entry = map[string]any{}
	}
	builtin := p.Name == provider.KindAnthropic || p.Name == provider.KindOpenAI
	if p.Type != "" {
		entry["type"] = p.Type
	} else if !builtin && entry["type"] == nil {
		return usage(fmt.Errorf("provider %s: --type anthropic or --type openai is needed (only anthropic and openai have a default)", p.Name))
	}
	if p.BaseURL != "" {
		entry["base_url"] = p.BaseURL
	} else if !builtin && entry["base_url"] == nil {
		return usage(fmt.Errorf("provider %s: --base-url is needed (e.g. http://127.0.0.1:11434/v1 for Ollama)", p.Name))
	}
	if p.KeyEnv != "" {
		entry["api_key_env"] = p.KeyEnv
	}
	provs[p.Name] = entry
	doc["providers"] = provs
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return err
	}
	if _, err := provider.Load(l.Root, l.UID, func(string) string { return "" }); err != nil {
		// Put back what was there: a daemon must never read a bad file.
		if len(old) > 0 {
			_ = atomicfile.WriteFile(path, old, 0o600)
		} else {
			_ = os.Remove(path)
		}
		return usage(fmt.Errorf("provider %s not added: %w", p.Name, err))
	}
	where := "no key (a local server)"
	switch {
	case p.NoKey:
	case p.KeyEnv != "":
		where = "the key from $" + p.KeyEnv + " in the daemon's environment"
	default:
		key, err := readKey(p.Name, stdin, stderr)
		if err != nil {
			return usage(err)
		}
		sp := provider.SecretsPath(l.Root, l.UID, p.Name)
		if err := os.MkdirAll(filepath.Dir(sp), 0o700); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(sp, []byte(key+"\n"), 0o600); err != nil {
			return err
		}
		where = "the key in " + sp + " (mode 0600)"
	}
	fmt.Fprintf(stdout, "provider %s: %s; check it: ctx provider test %s\n", p.Name, where, p.Name)
	return nil
}

// readKey reads a key: from a terminal without echo, else all of stdin.
func readKey(name string, stdin *os.File, stderr io.Writer) (string, error) {
	var b []byte
	var err error
	if term.IsTerminal(int(stdin.Fd())) {
		fmt.Fprintf(stderr, "API key for %s (not shown): ", name)
		b, err = term.ReadPassword(int(stdin.Fd()))
		fmt.Fprintln(stderr)
	} else {
		b, err = io.ReadAll(io.LimitReader(stdin, 64<<10))
	}
	if err != nil {
		return "", fmt.Errorf("reading the key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("no key read for %s: type it, or pipe it on stdin (or --no-key, --key-env VAR)", name)
	}
	if strings.ContainsAny(key, "\r\n\t") || strings.IndexFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return "", errors.New("the key holds control characters or lines: not a key")
	}
	return key, nil
}

func providerList(l layout.Layout, stdout io.Writer) error {
	cfg, err := provider.Load(l.Root, l.UID, os.Getenv)
	if err != nil {
		return usage(err)
	}
	names := make([]string, 0, len(cfg.Providers))
	for n := range cfg.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tBASE URL\tKEY")
	for _, n := range names {
		pc := cfg.Providers[n]
		key := "none"
		switch {
		case pc.KeyError != nil:
			key = "refused: " + pc.KeyError.Error()
		case strings.HasPrefix(pc.KeySource, "$"):
			key = pc.KeySource + " (this shell's; the daemon reads its own environment)"
		case pc.KeySource != "":
			key = pc.KeySource
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n, pc.Kind, pc.BaseURL, key)
	}
	return tw.Flush()
}

// providerTest asks the provider for its model list (free, and it needs
// the key): the answer, or what failed — the host and port, the status and
// the provider's own words — and the fix.
func providerTest(ctx context.Context, l layout.Layout, name string, stdout io.Writer) error {
	cfg, err := provider.Load(l.Root, l.UID, os.Getenv)
	if err != nil {
		return usage(err)
	}
	pc, ok := cfg.Providers[name]
	if !ok {
		return usage(fmt.Errorf("no provider %q (ctx provider list; ctx provider add %s --type … --base-url …)", name, name))
	}
	if pc.KeyError != nil {
		return unavailable(fmt.Errorf("provider %s: its key is refused: %w (ctx provider add %s stores a new one)", name, pc.KeyError, name))
	}
	u := strings.TrimSuffix(pc.BaseURL, "/")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	switch pc.Kind {
	case provider.KindAnthropic:
		req.URL, _ = url.Parse(u + "/v1/models")
		req.Header.Set("anthropic-version", "2023-06-01")
		if !pc.APIKey.IsZero() {
			req.Header.Set("x-api-key", pc.APIKey.Reveal())
		}
	default:
		req.URL, _ = url.Parse(u + "/models")
		if !pc.APIKey.IsZero() {
			req.Header.Set("Authorization", "Bearer "+pc.APIKey.Reveal())
		}
	}
	host := provider.HostPort(req.URL.String()) // as a run's connection error names it
	keyFrom := "no key"
	if pc.KeySource != "" {
		keyFrom = "the key from " + pc.KeySource
	}
	hc := &http.Client{Timeout: 15 * time.Second}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		var ne net.Error
		fix := "check the address (ctx provider add " + name + " --base-url URL) and that the server runs"
		if errors.As(err, &ne) && ne.Timeout() {
			fix = "no answer in 15 s: check the network, a proxy, or the server"
		}
		return unavailable(fmt.Errorf("provider %s: cannot reach %s (%s): %v; %s", name, host, req.URL.Redacted(), rootCause(err), fix))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 != 2 {
		msg := strings.Join(strings.Fields(string(bytes.ToValidUTF8(body, []byte("?")))), " ")
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		fix := ""
		switch resp.StatusCode {
		case 401, 403:
			fix = "; " + keyFrom + " was refused: ctx provider add " + name + " stores a new one"
		case 404:
			fix = "; the base URL may be wrong (OpenAI-compatible ones end in /v1; Anthropic's has none)"
		case 429:
			fix = "; rate-limited or out of credit: see the provider's console"
		}
		return unavailable(fmt.Errorf("provider %s: GET %s → %s: %s%s", name, req.URL.Redacted(), resp.Status, msg, fix))
	}
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(body, &list)
	models := ""
	if len(list.Data) > 0 {
		models = fmt.Sprintf(", %d models listed", len(list.Data))
	}
	fmt.Fprintf(stdout, "provider %s: ok — GET %s → %s in %v%s (%s)\n", name, req.URL.Redacted(), resp.Status,
		time.Since(start).Round(time.Millisecond), models, keyFrom)
	return nil
}

// rootCause is the innermost error: "connection refused", not the whole
// chain of url.Error and net.OpError.
func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

func usage(err error) error       { return &ExitError{Code: ExitUsage, Err: err} }
func unavailable(err error) error { return &ExitError{Code: exitcode.Unavailable, Err: err} }
