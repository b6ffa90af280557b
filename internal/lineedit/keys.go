// Package lineedit is the chat's line editor: a message of any length up to
// a bound (never cut silently), bracketed paste as one message whatever its
// lines, an explicit newline key that eats nothing, word motions, and a
// history kept across chats. It reads a raw terminal's bytes and redraws
// its whole input on each change.
package lineedit

import (
	"unicode/utf8"
)

// key is one decoded input event.
type key struct {
	kind kind
	r    rune // kindRune
}

type kind int

const (
	kindNone kind = iota
	kindRune
	kindEnter
	kindNewline // Alt+Enter, Ctrl+J: a newline in the message
	kindBackspace
	kindDelete
	kindLeft
	kindRight
	kindWordLeft
	kindWordRight
	kindHome
	kindEnd
	kindUp
	kindDown
	kindKillLine   // Ctrl+U: the whole message
	kindKillEnd    // Ctrl+K
	kindKillWord   // Ctrl+W, Alt+Backspace
	kindInterrupt  // Ctrl+C
	kindEOF        // Ctrl+D
	kindRedraw     // Ctrl+L
	kindPasteStart // ESC[200~: what follows up to ESC[201~ is pasted text
)

const (
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
)

// decode takes the next key off p. n is how many bytes it used; n == 0
// means p holds only the start of a key (an escape sequence or a UTF-8
// character cut by the read): read more and call again with the rest in
// front. The bytes after kindPasteStart are the editor's to collect. An unknown sequence is used
// up whole and yields kindNone, so no byte of it is typed as text.
func decode(p []byte) (k key, n int) {
	if len(p) == 0 {
		return key{}, 0
	}
	b := p[0]
	switch b {
	case '\r':
		return key{kind: kindEnter}, 1
	case '\n':
		return key{kind: kindNewline}, 1
	case 1:
		return key{kind: kindHome}, 1
	case 2:
		return key{kind: kindLeft}, 1
	case 3:
		return key{kind: kindInterrupt}, 1
	case 4:
		return key{kind: kindEOF}, 1
	case 5:
		return key{kind: kindEnd}, 1
	case 6:
		return key{kind: kindRight}, 1
	case 8, 0x7f:
		return key{kind: kindBackspace}, 1
	case 11:
		return key{kind: kindKillEnd}, 1
	case 12:
		return key{kind: kindRedraw}, 1
	case 14:
		return key{kind: kindDown}, 1
	case 16:
		return key{kind: kindUp}, 1
	case 21:
		return key{kind: kindKillLine}, 1
	case 23:
		return key{kind: kindKillWord}, 1
	case '\t':
		return key{kind: kindRune, r: '\t'}, 1
	case 0x1b:
		return decodeEscape(p)
	}
	if b < 0x20 {
		return key{}, 1 // another control key: nothing
	}
	if b < utf8.RuneSelf {
		return key{kind: kindRune, r: rune(b)}, 1
	}
	if !utf8.FullRune(p) {
		return key{}, 0
	}
	r, size := utf8.DecodeRune(p)
	if r == utf8.RuneError && size == 1 {
		return key{}, 1 // not UTF-8: dropped
	}
	return key{kind: kindRune, r: r}, size
}

// maxSeq bounds an escape sequence: a longer run of parameter bytes is
// not one, and is dropped rather than waited for.
const maxSeq = 32

func decodeEscape(p []byte) (key, int) {
	if len(p) < 2 {
		return key{}, 0
	}
	switch p[1] {
	case '\r', '\n':
		return key{kind: kindNewline}, 2 // Alt+Enter: both bytes, nothing more
	case 0x7f, 8:
		return key{kind: kindKillWord}, 2
	case 'b', 'B':
		return key{kind: kindWordLeft}, 2
	case 'f', 'F':
		return key{kind: kindWordRight}, 2
	case 'O': // SS3: ESC O letter
		if len(p) < 3 {
			return key{}, 0
		}
		switch p[2] {
		case 'A':
			return key{kind: kindUp}, 3
		case 'B':
			return key{kind: kindDown}, 3
		case 'C':
			return key{kind: kindRight}, 3
		case 'D':
			return key{kind: kindLeft}, 3
		case 'H':
			return key{kind: kindHome}, 3
		case 'F':
			return key{kind: kindEnd}, 3
		}
		return key{}, 3
	case '[':
		return decodeCSI(p)
	case 0x1b:
		return key{}, 1 // ESC ESC: the first is a lone Escape
	}
	if p[1] < 0x20 {
		return key{}, 1 // a lone Escape before a control key
	}
	return key{}, 2 // Alt+another key: nothing
}

// decodeCSI reads ESC [ parameters final.
func decodeCSI(p []byte) (key, int) {
	i := 2
	for ; i < len(p) && i < maxSeq; i++ {
		if p[i] >= 0x40 && p[i] <= 0x7e {
			break
		}
	}
	if i >= maxSeq {
		return key{}, i
	}
	if i >= len(p) {
		return key{}, 0
	}
	params, final := string(p[2:i]), p[i]
	n := i + 1
	if final == '~' && params == "200" {
		return key{kind: kindPasteStart}, n
	}
	word := params == "1;5" || params == "1;3" // Ctrl or Alt with an arrow
	switch final {
	case 'A':
		return key{kind: kindUp}, n
	case 'B':
		return key{kind: kindDown}, n
	case 'C':
		if word {
			return key{kind: kindWordRight}, n
		}
		return key{kind: kindRight}, n
	case 'D':
		if word {
			return key{kind: kindWordLeft}, n
		}
		return key{kind: kindLeft}, n
	case 'H':
		return key{kind: kindHome}, n
	case 'F':
		return key{kind: kindEnd}, n
	case '~':
		switch params {
		case "1", "7":
			return key{kind: kindHome}, n
		case "4", "8":
			return key{kind: kindEnd}, n
		case "3":
			return key{kind: kindDelete}, n
		}
	}
	return key{}, n
}
