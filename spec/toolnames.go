package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// ToolNameValid reports whether chat APIs accept name as a function name: 1 to 64
// of A-Z, a-z, 0-9, _ and - (OpenAI's rule; the other providers' are no looser).
func ToolNameValid(name string) bool {
	if name == "" || len(name) > maxToolName {
		return false
	}
	for i := range len(name) {
		if !toolNameByte(name[i]) {
			return false
		}
	}
	return true
}

const maxToolName = 64

func toolNameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-'
}

// ModelToolNames returns, for each MCP tool named by its name on the server with the
// server's prefix, the name the model sees. MCP allows names chat APIs refuse (spaces,
// dots, more than 64 characters), and one such tool would make every model call fail,
// so such a name is mapped rather than the tool refused: each refused character
// becomes _, and a name that is then too long, or equal to another tool's, is cut to
// 55 characters and ends in _ and 8 hex digits of the original name's SHA-256. A valid
// name is never changed, and the result does not depend on the order of names. Two
// names that still coincide (the same name from two servers) both keep it: the caller
// cannot offer both.
func ModelToolNames(names []string) []string {
	out := make([]string, len(names))
	var replaced []int // names that only had characters replaced
	for i, n := range names {
		switch r := replaceRefused(n); {
		case ToolNameValid(n):
			out[i] = n
		case ToolNameValid(r):
			out[i] = r
			replaced = append(replaced, i)
		default: // empty or too long
			out[i] = hashedToolName(r, n)
		}
	}
	count := map[string]int{}
	for _, n := range out {
		count[n]++
	}
	for _, i := range replaced {
		if count[out[i]] > 1 {
			out[i] = hashedToolName(out[i], names[i])
		}
	}
	return out
}

// replaceRefused replaces each character chat APIs refuse in tool names with _.
func replaceRefused(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r < 128 && toolNameByte(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// hashedToolName cuts a mapped name and appends a short hash of the original name,
// so distinct originals get distinct names.
func hashedToolName(mapped, original string) string {
	const hexDigits = 8
	sum := sha256.Sum256([]byte(original))
	return mapped[:min(len(mapped), maxToolName-1-hexDigits)] + "_" + hex.EncodeToString(sum[:])[:hexDigits]
}
