package prompt

import (
	"fmt"
	"strings"
)

// Fitting a prompt into its window: the fixed parts in stages, then whole
// turns newest first, then history (W5–W9).

// stage is one part fitFixed may shrink: a.vals[key] = at(n) (trimmed) for
// n in [lo, hi], hi being the current size.
type stage struct {
	key, label string
	lo, hi     int
	at         func(n int) string
	orig       string // the untrimmed value before the cut, for the warning
	note       string
}

// fitFixed shrinks the parts in stage order — the tool context down to its
// pinned tools, then the rules, then the pinned tools — until the array
// without history (and with the turns already reserved) fits the budget
// (spec: W9, K5). It returns the untrimmed value chosen per key it changed.
func fitFixed(a *assembly, budget int, stages []stage, warn func(string, ...any)) (map[string]string, error) {
	hist := a.hist
	a.hist = nil
	defer func() { a.hist = hist }()
	cost := func() int { return arrayCost(a.messages()) }
	chosen := map[string]string{}
	if cost() <= budget {
		return chosen, nil
	}
	for _, st := range stages {
		if a.occ[st.key] == 0 || a.vals[st.key] == "" || st.hi <= st.lo && st.lo > 0 {
			continue
		}
		set := func(n int) {
			v := st.at(n)
			chosen[st.key] = v
			a.vals[st.key] = strings.TrimRight(v, "\n")
		}
		set(st.lo)
		if cost() > budget {
			if st.lo == 0 {
				warn("%s: left out entirely to fit the context window", st.label)
			} else {
				warn("%s: cut to %d of %d bytes to fit the context window%s", st.label, len(a.vals[st.key]), len(st.orig), st.note)
			}
			continue
		}
		lo, hi := st.lo, st.hi
		for lo < hi {
			mid := (lo + hi + 1) / 2
			set(mid)
			if cost() <= budget {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		set(lo)
		warn("%s: cut to %d of %d bytes to fit the context window%s", st.label, len(a.vals[st.key]), len(st.orig), st.note)
		return chosen, nil
	}
	if c := cost(); c > budget {
		return nil, &BudgetError{Need: c, Budget: budget}
	}
	return chosen, nil
}

// cleanTurns makes the turns' text valid UTF-8 (copies).
func cleanTurns(turns [][]Message) [][]Message {
	out := make([][]Message, 0, len(turns))
	for _, t := range turns {
		c := make([]Message, len(t))
		for i, m := range t {
			m.Content, m.Input = clean(m.Content), clean(m.Input)
			c[i] = m
		}
		out = append(out, c)
	}
	return out
}

// cutTurn returns a copy of turn with every tool result cut to at most max
// bytes of content, a visible marker saying so (max 0 leaves the marker only).
func cutTurn(turn []Message, max int) []Message {
	out := append([]Message(nil), turn...)
	for i := range out {
		if out[i].Role != "tool" {
			continue
		}
		s := out[i].Content
		if len(s) <= max {
			continue
		}
		marker := func(kept int) string {
			return fmt.Sprintf("[… tool result cut by ctx to fit the context window: %d of %d bytes shown]", kept, len(s))
		}
		kept := cutUTF8(s, max-len(marker(len(s)))-1)
		if kept == "" {
			out[i].Content = marker(0)
		} else {
			out[i].Content = kept + "\n" + marker(len(kept))
		}
	}
	return out
}

// selectTurns keeps the run's turns within the budget (spec: W8, W9;
// ): the newest always — its tool results cut when it does
// not fit whole — then earlier turns, newest first, whole; the older ones
// are left out (returned as omitted). Without a budget all are kept.
func selectTurns(a *assembly, turns [][]Message, budget int, warn func(string, ...any)) (omitted int, err error) {
	a.turns = nil
	if len(turns) == 0 {
		return 0, nil
	}
	if budget < 0 {
		a.turns = turns
		return 0, nil
	}
	hist := a.hist
	a.hist = nil
	defer func() { a.hist = hist }()
	cost := func() int { return arrayCost(a.messages()) }
	newest := turns[len(turns)-1]
	a.turns = [][]Message{newest}
	if cost() > budget {
		longest := 0
		for _, m := range newest {
			if m.Role == "tool" {
				longest = max(longest, len(m.Content))
			}
		}
		a.turns = [][]Message{cutTurn(newest, 0)}
		if c := cost(); c > budget {
			return 0, &BudgetError{Need: c, Budget: budget}
		}
		lo, hi := 0, longest
		for lo < hi {
			mid := (lo + hi + 1) / 2
			a.turns = [][]Message{cutTurn(newest, mid)}
			if cost() <= budget {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		a.turns = [][]Message{cutTurn(newest, lo)}
		warn("tool results: the latest cut to at most %d bytes each to fit the context window", lo)
	}
	kept := 1
	for i := len(turns) - 2; i >= 0; i-- {
		a.turns = append([][]Message{turns[i]}, a.turns...)
		if cost() > budget {
			a.turns = a.turns[1:]
			break
		}
		kept++
	}
	return len(turns) - kept, nil
}

// selectHistory keeps the newest whole messages that fit (spec: W9): within
// budget-minus-the-rest when budget ≥ 0, and within histCap when ≥ 0.
func selectHistory(a *assembly, hist []Message, budget, histCap int) (kept []Message, omitted int) {
	if len(hist) == 0 {
		return nil, 0
	}
	a.hist = nil
	room := -1
	if budget >= 0 {
		room = budget - arrayCost(a.messages())
	}
	used, capUsed := 0, 2 // capUsed: the view as its own JSON array / text
	if a.inline() {
		capUsed = 0
	}
	n := 0
	for i := len(hist) - 1; i >= 0; i-- {
		var c, cc int
		if a.inline() {
			c = jsonCost(historyBlock(hist[i]))
			if n > 0 {
				c += jsonCost("\n\n")
			}
			cc = c
			c *= a.occ["history"]
		} else {
			c = msgCost(hist[i]) + 1 // and a comma
			cc = msgCost(hist[i])
			if n > 0 {
				cc++
			}
		}
		if room >= 0 && used+c > room || histCap >= 0 && capUsed+cc > histCap {
			break
		}
		used += c
		capUsed += cc
		n++
	}
	return hist[len(hist)-n:], len(hist) - n
}
