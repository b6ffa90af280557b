// Package window validates the `window` control file and computes the
// context-window budget every prompt build and agent environment uses
// (runtime.md W1–W11).
//
// Units: the window is counted in tokens; budgets are counted in "chars",
// which the host charges as UTF-8 bytes of the JSON-serialized message array
// (W8), estimated at 4 per token (W7). Every char quantity is a uint32 and all
// arithmetic saturates at 4294967295 instead of wrapping (W7).
package window

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// CharsPerToken is the conservative estimate of W7.
const CharsPerToken = 4

// MaxReserveTokens caps the output reserve (W8).
const MaxReserveTokens = 4096

// Environment variable names set for an agent when the window is known (W7).
const (
	EnvTokens = "CTX_CONTEXT_WINDOW_TOKENS"
	EnvChars  = "CTX_CONTEXT_WINDOW_CHARS"
)

// Legacy sub-budgets, in chars, used when the effective window is unknown
// (spec: W10). No total is claimed; each part of the prompt is capped on its
// own, conservatively enough for any current model with at least 32k tokens:
//
//	system text (system.md)          16 KiB  (16384)
//	rules (merged AGENTS.md)         32 KiB  (32768, = one AGENTS.md file cap)
//	tool context                     16 KiB  (16384)
//	history view                     32 KiB  (32768, newest first)
//	skill metadata                    8,000  (R2)
//	current input                    not cut (the socket already refuses > 512 KiB)
//
// A part over its cap is cut on a UTF-8 boundary with a visible marker and a
// warning; durable history is never deleted, only left out of the view.
const (
	LegacySystemChars  = 16 << 10
	LegacyRulesChars   = 32 << 10
	LegacyToolsChars   = 16 << 10
	LegacyHistoryChars = 32 << 10
	LegacySkillsChars  = 8000
)

// ErrInvalid is wrapped by every Parse error: the control file does not hold
// a valid value (W2).
var ErrInvalid = errors.New("window invalid")

// ErrInvariant is wrapped by every *InvariantError (W5).
var ErrInvariant = errors.New("window exceeds model limit")

// Value is a parsed `window` control file: auto, or an explicit positive token
// count. The zero Value is auto.
type Value struct {
	tokens uint32 // 0 = auto
}

// Auto is the `auto` value. spec: W3
func Auto() Value { return Value{} }

// Tokens returns an explicit value; n must be > 0 (0 yields auto).
func Tokens(n uint32) Value { return Value{tokens: n} }

// IsAuto reports whether v is `auto`.
func (v Value) IsAuto() bool { return v.tokens == 0 }

// Explicit returns the explicit token count; ok is false for auto.
func (v Value) Explicit() (tokens uint32, ok bool) { return v.tokens, v.tokens != 0 }

// String is the value as written in the file, without the LF.
func (v Value) String() string {
	if v.IsAuto() {
		return "auto"
	}
	return strconv.FormatUint(uint64(v.tokens), 10)
}

// Bytes is the exact content of a valid control file for v.
func (v Value) Bytes() []byte { return []byte(v.String() + "\n") }

// Parse validates the content of a `window` control file (spec: W2): exactly
// one LF-terminated line holding `auto` or a positive decimal u32 without
// sign, surrounding space or leading zero. Zero, overflow, empty content, CR
// and extra lines are invalid.
func Parse(b []byte) (Value, error) {
	if len(b) == 0 {
		return Value{}, fmt.Errorf("window: empty file: %w", ErrInvalid)
	}
	if b[len(b)-1] != '\n' {
		return Value{}, fmt.Errorf("window: line not LF-terminated: %w", ErrInvalid)
	}
	line := b[:len(b)-1]
	for _, c := range line {
		if c == '\n' {
			return Value{}, fmt.Errorf("window: more than one line: %w", ErrInvalid)
		}
	}
	if string(line) == "auto" {
		return Auto(), nil
	}
	if len(line) == 0 {
		return Value{}, fmt.Errorf("window: empty line: %w", ErrInvalid)
	}
	for _, c := range line {
		if c < '0' || c > '9' {
			return Value{}, fmt.Errorf("window: %q: want auto or a positive decimal token count: %w", line, ErrInvalid)
		}
	}
	if line[0] == '0' {
		if len(line) == 1 {
			return Value{}, fmt.Errorf("window: zero: %w", ErrInvalid)
		}
		return Value{}, fmt.Errorf("window: %q: leading zero: %w", line, ErrInvalid)
	}
	n, err := strconv.ParseUint(string(line), 10, 32)
	if err != nil {
		return Value{}, fmt.Errorf("window: %q: larger than %d: %w", line, uint32(math.MaxUint32), ErrInvalid)
	}
	return Tokens(uint32(n)), nil
}

// Effective is the window a run uses with one model candidate (spec: W4):
// auto → the candidate's known limit, else unknown; a number → that number.
// It does not check W5; see CheckInvariant and ForCandidate.
func Effective(v Value, modelLimit uint32, known bool) (tokens uint32, ok bool) {
	if n, explicit := v.Explicit(); explicit {
		return n, true
	}
	if !known || modelLimit == 0 {
		return 0, false
	}
	return modelLimit, true
}

// InvariantError says why an explicit window is not valid with a model (W5).
// It wraps ErrInvariant; the CLI maps it to exit 2 and the run to a
// `window_invalid` error or an `unusable` candidate frame.
type InvariantError struct {
	Model  string // the candidate, when known to the caller
	Window uint32 // the explicit window
	Limit  uint32 // the model limit, when Known
	Known  bool   // whether the model limit is known
}

func (e *InvariantError) Error() string {
	m := "the model"
	if e.Model != "" {
		m = fmt.Sprintf("model %s", e.Model)
	}
	if !e.Known {
		return fmt.Sprintf("window %d needs a known limit, and %s has none (set window auto, or add the model to models.tsv)", e.Window, m)
	}
	return fmt.Sprintf("window %d exceeds the %d-token limit of %s", e.Window, e.Limit, m)
}

// Reason is the human-readable reason, the same text as Error.
func (e *InvariantError) Reason() string { return e.Error() }

// Unwrap makes errors.Is(err, ErrInvariant) hold.
func (e *InvariantError) Unwrap() error { return ErrInvariant }

// CheckInvariant enforces W5: `auto` is always valid; an explicit number is
// valid only when the model's limit is known and the number is not above it.
// The error is an *InvariantError.
func CheckInvariant(v Value, limit uint32, known bool) error {
	n, explicit := v.Explicit()
	if !explicit {
		return nil
	}
	if !known || limit == 0 {
		return &InvariantError{Window: n}
	}
	if n > limit {
		return &InvariantError{Window: n, Limit: limit, Known: true}
	}
	return nil
}

// Limits answers model-limit questions; models.Table implements it.
type Limits interface {
	Limit(model string) (tokens uint32, ok bool)
}

// ForCandidate re-checks the invariant for one model candidate (spec: W6) and
// returns its effective window. A non-nil error (an *InvariantError naming
// the model) means the candidate is unusable: the run records a `candidate`
// frame with status `unusable` and tries the next one; settings never change.
func ForCandidate(v Value, model string, limits Limits) (tokens uint32, known bool, err error) {
	limit, lk := limits.Limit(model)
	if err := CheckInvariant(v, limit, lk); err != nil {
		var ie *InvariantError
		if errors.As(err, &ie) {
			ie.Model = model
		}
		return 0, false, err
	}
	tokens, known = Effective(v, limit, lk)
	return tokens, known, nil
}

func satMul(a, b uint32) uint32 {
	p := uint64(a) * uint64(b)
	if p > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(p)
}

func satSub(a, b uint32) uint32 {
	if b > a {
		return 0
	}
	return a - b
}

// Chars converts tokens to the char estimate, 4 per token, saturating (W7).
func Chars(tokens uint32) uint32 { return satMul(tokens, CharsPerToken) }

// Env is the agent environment for a known effective window (spec: W7):
// CTX_CONTEXT_WINDOW_TOKENS and CTX_CONTEXT_WINDOW_CHARS in decimal. Call it
// only when the window is known; when it is unknown neither variable is set
// (W10). tokens == 0 (not a valid window) yields nil.
func Env(tokens uint32) map[string]string {
	if tokens == 0 {
		return nil
	}
	return map[string]string{
		EnvTokens: strconv.FormatUint(uint64(tokens), 10),
		EnvChars:  strconv.FormatUint(uint64(Chars(tokens)), 10),
	}
}

// Reserve is the output reserve in tokens (spec: W8):
// min(4096, max(1, eff/4)).
func Reserve(eff uint32) uint32 {
	return min(MaxReserveTokens, max(1, eff/4))
}

// InputBudgetChars is the input budget in chars (spec: W8):
// eff*4 − 4*reserve, saturating at both ends (never negative, never wraps).
// The serialized message array must not be longer, in UTF-8 bytes.
func InputBudgetChars(eff uint32) uint32 {
	return satSub(Chars(eff), satMul(CharsPerToken, Reserve(eff)))
}

// SkillBudget is the share of an input budget skill metadata may use
// (spec: W9, R2): 2 %, rounded down.
func SkillBudget(chars uint32) uint32 {
	return uint32(uint64(chars) * 2 / 100)
}
