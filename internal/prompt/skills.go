package prompt

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// Skill is the metadata of one Agent Skill that may enter the prompt (R2):
// name, description and the SKILL.md path as the agent sees it. Nothing else
// of a SKILL.md is read before the skill is selected.
type Skill struct {
	Name        string
	Description string
	Path        string // sandbox (view) path of SKILL.md
}

// Skill discovery limits.
const (
	SkillFile           = "SKILL.md"
	MaxSkillsPerDir     = 512  // skill directories looked at per root
	MaxSkillNameLen     = 64   // Agent Skills: name ≤ 64 chars
	MaxSkillDescLen     = 1024 // Agent Skills: description ≤ 1024 chars
	MinShortDescription = 40   // descriptions are not shortened below this before skills are omitted
)

// skillRoots are the directories searched, most specific first; a name found
// in an earlier root shadows the same name later.
//
//	<workspace>/.agents/skills/*/SKILL.md   (the project's skills)
//	<agent home>/skills/*/SKILL.md          (this agent's, /home/agent/skills)
//	CTX_HOME/skills/*/SKILL.md              (the user's, for every agent)
func skillRoots(in *Inputs) []Dir {
	var roots []Dir
	add := func(d Dir, sub ...string) {
		if d.Host == "" {
			return
		}
		rel := filepath.Join(sub...)
		roots = append(roots, Dir{Host: filepath.Join(d.Host, rel), View: filepath.Join(d.viewRoot(), rel)})
	}
	add(in.Workspace, ".agents", "skills")
	add(in.AgentHome, "skills")
	add(in.CtxHome, "skills")
	return roots
}

// collectSkills reads only the front matter of each SKILL.md.
func collectSkills(fsys fileSystem, in *Inputs) (skills []Skill, warnings []string) {
	seen := map[string]string{}
	for _, root := range skillRoots(in) {
		ents, err := fsys.readDir(root.Host)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				warnings = append(warnings, fmt.Sprintf("skills: %s: %v", root.View, err))
			}
			continue
		}
		n := 0
		for _, e := range ents {
			if !e.IsDir() { // symlinked skill directories are not followed
				continue
			}
			if n++; n > MaxSkillsPerDir {
				warnings = append(warnings, fmt.Sprintf("skills: %s: more than %d skill directories; the rest are ignored", root.View, MaxSkillsPerDir))
				break
			}
			host := filepath.Join(root.Host, e.Name(), SkillFile)
			view := filepath.Join(root.View, e.Name(), SkillFile)
			s, err := readSkill(fsys, host)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("skills: %s: skipped: %v", view, err))
				continue
			}
			s.Path = view
			if prev, dup := seen[s.Name]; dup {
				warnings = append(warnings, fmt.Sprintf("skills: %s: name %q already taken by %s; skipped", view, s.Name, prev))
				continue
			}
			seen[s.Name] = view
			skills = append(skills, s)
		}
	}
	return skills, warnings
}

func readSkill(fsys fileSystem, path string) (Skill, error) {
	f, err := fsys.open(path, true)
	if err != nil {
		return Skill{}, err
	}
	defer f.Close()
	fm, err := ParseFrontMatter(f) // spec: R2 — bounded, stops at the closing ---
	if err != nil {
		return Skill{}, err
	}
	name := oneLine(fm["name"])
	desc := oneLine(fm["description"])
	if err := checkSkillName(name); err != nil {
		return Skill{}, err
	}
	if desc == "" {
		return Skill{}, errors.New("front matter has no description")
	}
	if utf8.RuneCountInString(desc) > MaxSkillDescLen {
		desc = shorten(desc, MaxSkillDescLen)
	}
	return Skill{Name: name, Description: desc}, nil
}

// checkSkillName follows the Agent Skills rule: 1–64 of [a-z0-9-], no
// leading, trailing or double hyphen.
func checkSkillName(n string) error {
	if n == "" {
		return errors.New("front matter has no name")
	}
	if len(n) > MaxSkillNameLen || n[0] == '-' || n[len(n)-1] == '-' || strings.Contains(n, "--") ||
		strings.IndexFunc(n, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') }) >= 0 {
		return fmt.Errorf("skill name %q: want 1-%d of [a-z0-9-]", n, MaxSkillNameLen)
	}
	return nil
}

// oneLine collapses all whitespace (newlines included) to single spaces, so
// metadata cannot forge prompt structure.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// shorten keeps at most n runes, ending with "…" when it cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	i := 0
	for j := range s {
		if i == n-1 {
			return strings.TrimRight(s[:j], " ") + "…"
		}
		i++
	}
	return s
}

// RenderSkills is the text of {{skills}} and of the SKILLS.md snapshot: one
// line per skill, "- name: description (path)".
func RenderSkills(skills []Skill) string {
	var b strings.Builder
	for i, s := range skills {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "- %s: %s (%s)", s.Name, s.Description, s.Path)
	}
	return b.String()
}

// fitSkills applies the skill-metadata cap (spec: R2, W9): when the rendered
// list costs more than capChars, descriptions are shortened first (never below
// MinShortDescription runes), then skills are omitted from the end of the
// list (the least specific root first), with warnings. Cost is the JSON-escaped
// byte length, the unit the whole prompt is charged in.
func fitSkills(all []Skill, capChars int) (kept []Skill, warnings []string) {
	if len(all) == 0 {
		return nil, nil
	}
	cost := func(s []Skill) int { return jsonCost(RenderSkills(s)) }
	if cost(all) <= capChars {
		return all, nil
	}
	maxDesc := 0
	for _, s := range all {
		maxDesc = max(maxDesc, utf8.RuneCountInString(s.Description))
	}
	withDesc := func(s []Skill, n int) []Skill {
		out := make([]Skill, len(s))
		for i, k := range s {
			out[i] = k
			out[i].Description = shorten(k.Description, n)
		}
		return out
	}
	// Longest description length in [lo, maxDesc] at which list s fits; -1 if none.
	bestLen := func(s []Skill, lo int) int {
		if lo > maxDesc || cost(withDesc(s, lo)) > capChars {
			return -1
		}
		hi := maxDesc
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if cost(withDesc(s, mid)) <= capChars {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return lo
	}
	floor := min(MinShortDescription, maxDesc)
	if n := bestLen(all, floor); n >= 0 {
		return withDesc(all, n), []string{fmt.Sprintf("skills: metadata over its %d-char budget: descriptions shortened to %d chars", capChars, n)}
	}
	// Omit skills: the longest prefix that fits at the floor, then let the
	// survivors' descriptions grow back into the room left.
	k := sort.Search(len(all)+1, func(k int) bool { return cost(withDesc(all[:k], floor)) > capChars }) - 1
	kept = all[:k]
	names := make([]string, 0, len(all)-k)
	for _, s := range all[k:] {
		names = append(names, s.Name)
	}
	warnings = append(warnings, fmt.Sprintf("skills: metadata over its %d-char budget: %d skill(s) omitted: %s", capChars, len(names), strings.Join(names, ", ")))
	if k == 0 {
		return nil, warnings
	}
	n := bestLen(kept, floor)
	return withDesc(kept, n), warnings
}
