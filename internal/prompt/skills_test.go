package prompt

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCollectSkillsPrecedenceAndErrors(t *testing.T) {
	in, _ := fixture(t)
	ws := filepath.Join(in.Workspace.Host, ".agents", "skills")
	// Same name as a global one: the workspace wins.
	write(t, filepath.Join(ws, "pdf2", "SKILL.md"), skillMD("pdf", "Project PDF tool.", ""))
	write(t, filepath.Join(ws, "bad-name", "SKILL.md"), skillMD("Bad Name", "x", ""))
	write(t, filepath.Join(ws, "no-desc", "SKILL.md"), "---\nname: no-desc\n---\n")
	write(t, filepath.Join(ws, "no-fm", "SKILL.md"), "# just markdown\n")
	os.MkdirAll(filepath.Join(ws, "empty-dir"), 0o755)
	// A symlinked SKILL.md is not followed.
	secret := filepath.Join(t.TempDir(), "secret")
	write(t, secret, skillMD("secret", "TOP SECRET", ""))
	os.MkdirAll(filepath.Join(ws, "link"), 0o755)
	os.Symlink(secret, filepath.Join(ws, "link", "SKILL.md"))
	skills, warnings := collectSkills(osFS{}, &in)
	var names []string
	for _, s := range skills {
		names = append(names, s.Name+"@"+s.Path)
	}
	want := "go-fuzz@/workspace/.agents/skills/go-fuzz/SKILL.md pdf@/workspace/.agents/skills/pdf2/SKILL.md review@/home/agent/skills/review/SKILL.md"
	if strings.Join(names, " ") != want {
		t.Errorf("got %v", names)
	}
	joined := strings.Join(warnings, "\n")
	for _, w := range []string{"bad-name", "no-desc", "no-fm", "link", "already taken"} {
		if !strings.Contains(joined, w) {
			t.Errorf("no warning about %s in:\n%s", w, joined)
		}
	}
	if strings.Contains(joined, "empty-dir") || strings.Contains(fmt.Sprint(skills), "SECRET") {
		t.Errorf("unexpected: %s", joined)
	}
}

// spec: R2 — shorten descriptions first, then omit skills, with warnings.
func TestFitSkills(t *testing.T) {
	var all []Skill
	for i := range 20 {
		all = append(all, Skill{Name: fmt.Sprintf("skill-%02d", i), Description: strings.Repeat("word ", 40) + "end", Path: fmt.Sprintf("/ws/.agents/skills/s%02d/SKILL.md", i)})
	}
	full := jsonCost(RenderSkills(all))
	kept, w := fitSkills(all, full)
	if len(kept) != 20 || len(w) != 0 {
		t.Fatal("fits at full size")
	}
	kept, w = fitSkills(all, full*2/3)
	if len(kept) != 20 || len(w) != 1 || !strings.Contains(w[0], "shortened") {
		t.Fatalf("want shortened: %d %v", len(kept), w)
	}
	if c := jsonCost(RenderSkills(kept)); c > full*2/3 || c < full*2/3-20*2 {
		t.Errorf("shortened cost %d, cap %d", c, full*2/3)
	}
	if !strings.HasSuffix(kept[0].Description, "…") || utf8.RuneCountInString(kept[0].Description) < MinShortDescription {
		t.Errorf("description %q", kept[0].Description)
	}
	kept, w = fitSkills(all, 1000)
	if len(kept) == 0 || len(kept) == 20 || len(w) != 1 || !strings.Contains(w[0], "omitted") || !strings.Contains(w[0], "skill-19") {
		t.Fatalf("want omitted: %d %v", len(kept), w)
	}
	if jsonCost(RenderSkills(kept)) > 1000 || kept[0].Name != "skill-00" {
		t.Error("over cap or wrong order")
	}
	kept, w = fitSkills(all, 0)
	if len(kept) != 0 || len(w) != 1 {
		t.Errorf("cap 0: %v %v", kept, w)
	}
}

// spec: R2 W9 — the cap inside Build is 2 % of the budget, 8,000 when unknown.
func TestBuildSkillCap(t *testing.T) {
	in, _ := fixture(t)
	for i := range 100 {
		write(t, filepath.Join(in.CtxHome.Host, "skills", fmt.Sprintf("s%03d", i), "SKILL.md"),
			skillMD(fmt.Sprintf("s%03d", i), strings.Repeat("describe ", 30), ""))
	}
	in.WindowTokens = 100000
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if c := jsonCost(RenderSkills(r.Skills)); c > r.BudgetChars*2/100 {
		t.Errorf("skills %d > 2%% of %d", c, r.BudgetChars)
	}
	in.WindowKnown = false
	r, _ = Build(in)
	if c := jsonCost(RenderSkills(r.Skills)); c > 8000 || c < 7000 {
		t.Errorf("unknown window skills %d", c)
	}
	if len(r.Warnings) == 0 {
		t.Error("no warning")
	}
}

// spec: R2 — full SKILL.md bodies are never read: one open per skill, and
// only the front matter's neighbourhood read from a 1 MiB file.
func TestSkillBodiesNotRead(t *testing.T) {
	in, _ := fixture(t)
	huge := strings.Repeat("This body is long and must not be read.\n", 1<<20/40)
	for i := range 50 {
		write(t, filepath.Join(in.CtxHome.Host, "skills", fmt.Sprintf("big%02d", i), "SKILL.md"),
			skillMD(fmt.Sprintf("big%02d", i), "A skill with a huge body.", huge))
	}
	cfs := newCountingFS()
	in.fsys = cfs
	if _, err := Build(in); err != nil {
		t.Fatal(err)
	}
	n := 0
	for p, opens := range cfs.opens {
		if filepath.Base(p) != SkillFile {
			continue
		}
		n++
		if opens != 1 {
			t.Errorf("%s opened %d times", p, opens)
		}
		if cfs.read[p] > 1024 {
			t.Errorf("%s: %d bytes read", p, cfs.read[p])
		}
	}
	if n != 53 {
		t.Errorf("%d SKILL.md files opened, want 53", n)
	}
}
