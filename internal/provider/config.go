package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/safefs"
)

// FileName is the provider file under CTX_ROOT.
const FileName = "providers.json"

// Provider kinds: the wire protocol a provider entry speaks.
const (
	KindAnthropic = "anthropic" // POST {base_url}/v1/messages
	KindOpenAI    = "openai"    // POST {base_url}/chat/completions
)

// Built-in defaults.
const (
	DefaultAnthropicBaseURL = "https://api.anthropic.com" // without /v1, as ANTHROPIC_BASE_URL
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1" // with /v1, as OPENAI_BASE_URL
	DefaultMaxTokens        = 4096                        // Anthropic max_tokens; spec: W11 (never derived from the window)
	DefaultTimeout          = 10 * time.Minute
	DefaultIdleTimeout      = 2 * time.Minute
	DefaultAttempts         = 3
	DefaultBackoff          = time.Second
	DefaultMaxBackoff       = 30 * time.Second
	DefaultMaxRetryAfter    = 60 * time.Second
)

// Config is the resolved provider configuration: providers.json, the daemon's
// environment and the owner's secrets, keyed by provider name (the part of a
// candidate before the first "/").
type Config struct {
	Providers map[string]ProviderConfig
}

// ProviderConfig is one resolved provider entry.
type ProviderConfig struct {
	Name     string
	Kind     string // KindAnthropic or KindOpenAI
	BaseURL  string
	APIKey   Secret // zero: send no credential (local servers)
	KeyError error  // a credential source was refused; Dispatch reports the candidate failed
	// KeySource says where the key came from, never the key: "$NAME", the
	// secrets file's path, or "" (none).
	KeySource string
	MaxTokens int // W11: a fixed output limit; for openai 0 omits it
	// MaxTokensField is the openai request field carrying MaxTokens:
	// "max_completion_tokens" (OpenAI's current name) or "max_tokens" (what
	// Ollama's /v1, llama.cpp and most compatible servers read). Default:
	// DefaultMaxTokensField of the base URL.
	MaxTokensField string
	Timeout        time.Duration // bounds a whole request, stream included
	IdleTimeout    time.Duration // bounds the wait for headers and between stream reads
	Retry          RetryPolicy
	// Impl, when set, is used instead of an HTTP provider of Kind (tests and
	// fakes for the run actor). It is never read from the file.
	Impl Provider
}

// RetryPolicy bounds the attempts on one candidate (W6).
type RetryPolicy struct {
	Attempts      int           // total attempts per candidate, at least 1
	Backoff       time.Duration // first delay; doubles each attempt, with jitter
	MaxBackoff    time.Duration // cap of the computed delay
	MaxRetryAfter time.Duration // a longer retry-after moves on to the next candidate at once
}

// fileConfig is providers.json.
type fileConfig struct {
	Providers map[string]fileProvider `json:"providers"`
}

type fileProvider struct {
	Type           string   `json:"type"`
	BaseURL        string   `json:"base_url"`
	APIKeyEnv      *string  `json:"api_key_env"`
	MaxTokens      *int     `json:"max_tokens"`
	MaxTokensField string   `json:"max_tokens_field"`
	Timeout        duration `json:"timeout"`
	IdleTimeout    duration `json:"idle_timeout"`
	Attempts       int      `json:"attempts"`
	Backoff        duration `json:"backoff"`
	MaxBackoff     duration `json:"max_backoff"`
	MaxRetryAfter  duration `json:"max_retry_after"`
}

// duration is a Go duration string in JSON ("90s", "2m").
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("duration %q must be positive", s)
	}
	*d = duration(v)
	return nil
}

var envNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// builtin describes the two providers that exist without a file entry.
var builtin = map[string]struct{ kind, baseURL, baseEnv, keyEnv string }{
	"anthropic": {KindAnthropic, DefaultAnthropicBaseURL, "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"},
	"openai":    {KindOpenAI, DefaultOpenAIBaseURL, "OPENAI_BASE_URL", "OPENAI_API_KEY"},
}

// SecretsPath is $CTX_ROOT/home/<uid>/secrets/<provider>.
func SecretsPath(root string, uid int, provider string) string {
	return filepath.Join(root, "home", strconv.Itoa(uid), "secrets", provider)
}

// Load resolves the configuration: $root/providers.json when present (it must
// not be writable by group or others), then, per provider, the base URL
// (ANTHROPIC_BASE_URL / OPENAI_BASE_URL for the providers named anthropic and
// openai override the file, as the official SDKs let them) and the key (the
// daemon's environment variable, else the uid's secrets file). getenv is the
// daemon's environment; Load reads no other variable. A refused secrets file
// does not fail Load: it is recorded in that provider's KeyError so that only
// its candidates fail, auditably.
func Load(root string, uid int, getenv func(string) string) (Config, error) {
	var fc fileConfig
	path := filepath.Join(root, FileName)
	data, err := readConfigFile(path)
	if err != nil {
		return Config{}, err
	}
	if data != nil {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fc); err != nil {
			return Config{}, fmt.Errorf("%s: %w: %w", path, ErrConfig, err)
		}
	}
	entries := map[string]fileProvider{}
	for name := range builtin {
		entries[name] = fileProvider{}
	}
	for name, fp := range fc.Providers {
		entries[name] = fp
	}
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)
	cfg := Config{Providers: map[string]ProviderConfig{}}
	for _, name := range names {
		pc, err := resolve(name, entries[name], root, uid, getenv)
		if err != nil {
			return Config{}, fmt.Errorf("%s: provider %q: %w", path, name, err)
		}
		cfg.Providers[name] = pc
	}
	return cfg, nil
}

func readConfigFile(path string) ([]byte, error) {
	f, st, err := safefs.OpenRegular(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, safefs.ErrNotRegular):
		return nil, fmt.Errorf("%s: %w: not a regular file", path, ErrConfig)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer f.Close()
	// A file others can write could redirect base_url and so the key.
	if st.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%s: %w: mode %04o is writable by group or others", path, ErrConfig, st.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrConfig, err)
	}
	if len(data) > 1<<20 {
		return nil, fmt.Errorf("%s: %w: over 1 MiB", path, ErrConfig)
	}
	return data, nil
}

func resolve(name string, fp fileProvider, root string, uid int, getenv func(string) string) (ProviderConfig, error) {
	if err := layout.CheckName("provider", name); err != nil {
		return ProviderConfig{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	b, isBuiltin := builtin[name]
	pc := ProviderConfig{
		Name:           name,
		Kind:           fp.Type,
		BaseURL:        fp.BaseURL,
		MaxTokensField: fp.MaxTokensField,
		Timeout:        or(time.Duration(fp.Timeout), DefaultTimeout),
		IdleTimeout:    or(time.Duration(fp.IdleTimeout), DefaultIdleTimeout),
		Retry: RetryPolicy{
			Attempts:      fp.Attempts,
			Backoff:       or(time.Duration(fp.Backoff), DefaultBackoff),
			MaxBackoff:    or(time.Duration(fp.MaxBackoff), DefaultMaxBackoff),
			MaxRetryAfter: or(time.Duration(fp.MaxRetryAfter), DefaultMaxRetryAfter),
		},
	}
	keyEnv := ""
	if isBuiltin {
		if pc.Kind == "" {
			pc.Kind = b.kind
		}
		if v := getenv(b.baseEnv); v != "" {
			pc.BaseURL = v
		}
		if pc.BaseURL == "" {
			pc.BaseURL = b.baseURL
		}
		keyEnv = b.keyEnv
	}
	if fp.APIKeyEnv != nil {
		keyEnv = *fp.APIKeyEnv
		if keyEnv != "" && !envNameRE.MatchString(keyEnv) {
			return pc, fmt.Errorf("%w: api_key_env %q is not an environment variable name", ErrConfig, keyEnv)
		}
	}
	switch pc.Kind {
	case KindAnthropic:
		pc.MaxTokens = DefaultMaxTokens
	case KindOpenAI:
		if pc.MaxTokensField == "" {
			pc.MaxTokensField = DefaultMaxTokensField(pc.BaseURL)
		}
	case "":
		return pc, fmt.Errorf("%w: \"type\" is required (anthropic or openai)", ErrConfig)
	default:
		return pc, fmt.Errorf("%w: type %q is not anthropic or openai", ErrConfig, pc.Kind)
	}
	if fp.MaxTokens != nil {
		if *fp.MaxTokens < 0 || (pc.Kind == KindAnthropic && *fp.MaxTokens == 0) {
			return pc, fmt.Errorf("%w: max_tokens %d", ErrConfig, *fp.MaxTokens)
		}
		pc.MaxTokens = *fp.MaxTokens
	}
	if pc.Kind == KindOpenAI && pc.MaxTokensField != "max_completion_tokens" && pc.MaxTokensField != "max_tokens" {
		return pc, fmt.Errorf("%w: max_tokens_field %q is not max_completion_tokens or max_tokens", ErrConfig, pc.MaxTokensField)
	}
	if pc.Kind == KindAnthropic && pc.MaxTokensField != "" {
		return pc, fmt.Errorf("%w: max_tokens_field applies to openai only", ErrConfig)
	}
	if err := checkBaseURL(pc.BaseURL); err != nil {
		return pc, err
	}
	if pc.Retry.Attempts == 0 {
		pc.Retry.Attempts = DefaultAttempts
	}
	if pc.Retry.Attempts < 1 || pc.Retry.Attempts > 10 {
		return pc, fmt.Errorf("%w: attempts %d not in 1..10", ErrConfig, pc.Retry.Attempts)
	}
	// Credentials: the daemon's environment first, then the owner's secrets file.
	if keyEnv != "" {
		if v := getenv(keyEnv); v != "" {
			if err := checkKey(v); err != nil {
				pc.KeyError = fmt.Errorf("%w: $%s %w", ErrCredentials, keyEnv, err)
				return pc, nil
			}
			pc.APIKey, pc.KeySource = NewSecret(v), "$"+keyEnv
			return pc, nil
		}
	}
	pc.APIKey, pc.KeyError = readSecret(SecretsPath(root, uid, name), uid)
	if !pc.APIKey.IsZero() || pc.KeyError != nil {
		pc.KeySource = SecretsPath(root, uid, name)
	}
	if pc.APIKey.IsZero() && pc.KeyError == nil && keyEnv != "" && officialHost(pc.BaseURL) {
		// The hosted APIs answer a keyless request with 401 at best; say
		// what is missing and how to add it instead of asking.
		pc.KeyError = fmt.Errorf("%w: set $%s in the daemon's environment or run: ctx provider add %s", ErrNoKey, keyEnv, name)
	}
	return pc, nil
}

// officialHost says whether base names Anthropic's or OpenAI's hosted API.
func officialHost(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	h := strings.ToLower(u.Hostname())
	return h == "api.anthropic.com" || h == "api.openai.com"
}

// DefaultMaxTokensField is the openai output-limit field used when
// providers.json names none: max_completion_tokens for
// api.openai.com, which deprecated max_tokens and refuses it for its
// reasoning models; max_tokens everywhere else — Ollama's /v1 and
// llama.cpp's server read only that one, vLLM and the hosted compatible
// endpoints accept it.
func DefaultMaxTokensField(baseURL string) string {
	if u, err := url.Parse(baseURL); err == nil && strings.EqualFold(u.Hostname(), "api.openai.com") {
		return "max_completion_tokens"
	}
	return "max_tokens"
}

func or(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%w: base_url: %w", ErrConfig, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: base_url %q must be an http or https URL", ErrConfig, u.Redacted())
	}
	if u.User != nil {
		return fmt.Errorf("%w: base_url must not carry credentials; use the key sources", ErrConfig)
	}
	return nil
}

// checkKey refuses a key that cannot be an HTTP header value. Its error never
// quotes the key.
func checkKey(k string) error {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c == 0x7f {
			return errors.New("contains control characters")
		}
	}
	return nil
}

// readSecret reads a secrets file: absent is no key; present, it must be a
// regular file (not a symlink) owned by uid with no permission bits beyond
// 0600. The key is the file's content without surrounding white space.
// spec: B4, D9
func readSecret(path string, uid int) (Secret, error) {
	f, st, err := safefs.OpenRegular(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Secret{}, nil
	case errors.Is(err, safefs.ErrNotRegular):
		return Secret{}, fmt.Errorf("%w: secrets file %s: not a regular file", ErrCredentials, path)
	case err != nil:
		return Secret{}, fmt.Errorf("%w: secrets file: %w", ErrCredentials, err)
	}
	defer f.Close()
	if perm := st.Mode().Perm(); perm&^0o600 != 0 {
		return Secret{}, fmt.Errorf("%w: secrets file %s: mode %04o, want 0600", ErrCredentials, path, perm)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != uid {
		return Secret{}, fmt.Errorf("%w: secrets file %s: not owned by uid %d", ErrCredentials, path, uid)
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10+1))
	if err != nil {
		return Secret{}, fmt.Errorf("%w: secrets file %s: %w", ErrCredentials, path, err)
	}
	if len(data) > 64<<10 {
		return Secret{}, fmt.Errorf("%w: secrets file %s: over 64 KiB", ErrCredentials, path)
	}
	key := strings.TrimSpace(string(data))
	if key == "" {
		return Secret{}, fmt.Errorf("%w: secrets file %s: empty", ErrCredentials, path)
	}
	if err := checkKey(key); err != nil {
		return Secret{}, fmt.Errorf("%w: secrets file %s: %w", ErrCredentials, path, err)
	}
	return NewSecret(key), nil
}
