// Package prices reads the user's price table, which turns token usage into
// cost. The table is CTX_ROOT/home/<uid>/prices.tsv, a
// text file the user edits; nothing is priced without it, and no price is
// ever guessed.
//
// Format: one model per line, fields separated by tabs or spaces:
//
//	# model                      input  output  cache_read  cache_write   (USD per million tokens)
//	anthropic/claude-sonnet-4-5  3      15      0.30        3.75
//	openai/gpt-4o                2.50   10      1.25        -
//
// `#` starts a comment line; blank lines are ignored. The model is the
// candidate as written in the agent's model list (provider/model). A price
// is a non-negative decimal number, or `-` when unknown. A run's cost is
// known only when every kind of token it used has a price.
package prices

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/cortexfs/ctx/internal/layout"
)

// FileName is the table's name in the user's home (layout.UserHome).
const FileName = "prices.tsv"

// MaxSize bounds the file read.
const MaxSize = 1 << 20

// MaxPrice bounds one price (USD per million tokens): anything larger is
// a typo, not a price.
const MaxPrice = 1e6

// ErrSyntax marks a table that does not parse.
var ErrSyntax = errors.New("price table")

// Price is one model's prices in USD per million tokens; nil is unknown.
type Price struct {
	Input, Output, CacheRead, CacheWrite *float64
}

// Table maps a model to its prices.
type Table struct {
	m map[string]Price
}

// Usage is token use, as the done frame's usage names it.
type Usage struct {
	Input, Output, CacheRead, CacheWrite int64
}

// Path is the table's path for a layout.
func Path(l layout.Layout) string { return filepath.Join(l.UserHome(), FileName) }

// Load reads the table at path; an absent file is a nil table and no error.
func Load(path string) (*Table, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("price table %s: %w", path, err)
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%w %s: over %d bytes", ErrSyntax, path, MaxSize)
	}
	t, err := Parse(strings.NewReader(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse reads a table. Errors name the line and wrap ErrSyntax.
func Parse(r io.Reader) (*Table, error) {
	t := &Table{m: map[string]Price{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), MaxSize)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 5 {
			return nil, fmt.Errorf("%w: line %d: want 5 fields (model input output cache_read cache_write), got %d", ErrSyntax, n, len(f))
		}
		model := f[0]
		if err := checkModel(model); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrSyntax, n, err)
		}
		if _, dup := t.m[model]; dup {
			return nil, fmt.Errorf("%w: line %d: model %s is listed twice", ErrSyntax, n, model)
		}
		var p Price
		for i, dst := range []**float64{&p.Input, &p.Output, &p.CacheRead, &p.CacheWrite} {
			v, err := price(f[i+1])
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: %s: %v", ErrSyntax, n, []string{"input", "output", "cache_read", "cache_write"}[i], err)
			}
			*dst = v
		}
		t.m[model] = p
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrSyntax, n+1, err)
	}
	return t, nil
}

func checkModel(m string) error {
	if len(m) > 256 {
		return fmt.Errorf("model name over 256 bytes")
	}
	for _, r := range m {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("model name %q has a control or space character", m)
		}
	}
	return nil
}

func price(s string) (*float64, error) {
	if s == "-" {
		return nil, nil
	}
	for _, r := range s {
		if (r < '0' || r > '9') && r != '.' {
			return nil, fmt.Errorf("%q is not a decimal number or -", s)
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("%q is not a decimal number or -", s)
	}
	if v > MaxPrice {
		return nil, fmt.Errorf("%s is over %g per million tokens", s, MaxPrice)
	}
	return &v, nil
}

// Len is the number of models priced.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.m)
}

// Lookup returns a model's prices.
func (t *Table) Lookup(model string) (Price, bool) {
	if t == nil {
		return Price{}, false
	}
	p, ok := t.m[model]
	return p, ok
}

// Cost is what u cost on model, in USD, and whether it is known: the
// model is in the table and every kind of token used (non-zero) has a
// price.
func (t *Table) Cost(model string, u Usage) (float64, bool) {
	p, ok := t.Lookup(model)
	if !ok {
		return 0, false
	}
	var sum float64
	for _, k := range []struct {
		n int64
		p *float64
	}{{u.Input, p.Input}, {u.Output, p.Output}, {u.CacheRead, p.CacheRead}, {u.CacheWrite, p.CacheWrite}} {
		if k.n == 0 {
			continue
		}
		if k.p == nil || k.n < 0 {
			return 0, false
		}
		sum += float64(k.n) * *k.p / 1e6
	}
	return sum, true
}

// CostByModel prices usage per model (keys input, output, cache_read,
// cache_write, as sessions.AddUsage sums them); known only when every
// model is priced for every kind of token it used.
func (t *Table) CostByModel(by map[string]map[string]int64) (float64, bool) {
	if len(by) == 0 {
		return 0, false
	}
	var sum float64
	for m, u := range by {
		for k := range u {
			switch k {
			case "input", "output", "cache_read", "cache_write":
			default:
				return 0, false // a kind of token the table has no column for
			}
		}
		c, ok := t.Cost(m, Usage{Input: u["input"], Output: u["output"], CacheRead: u["cache_read"], CacheWrite: u["cache_write"]})
		if !ok {
			return 0, false
		}
		sum += c
	}
	return sum, true
}

// Format shows a cost in USD: four decimals under a dollar, two above.
func Format(usd float64) string {
	if usd < 1 {
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}
