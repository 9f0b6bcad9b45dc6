package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime/model"
)

// Fact is one thing remembered about a user.
type Fact struct {
	Key     string    `json:"key"`
	Value   string    `json:"value"`
	Source  string    `json:"source"` // tool, llm or user
	Updated time.Time `json:"updated"`
}

// Facts reads a user's long-term facts. The memory stores implement it; the runtime
// only consumes it.
type Facts interface {
	Facts(ctx context.Context, userID string) ([]Fact, error)
}

// Store is where runs remember: conversation history (short-term) and facts about
// users (long-term). Implementations: runtime/store/memory (process-local),
// runtime/store/sqlite (the default), runtime/store/redis and runtime/store/postgres.
type Store interface {
	Facts
	// Conversation returns the last turns of a conversation — a turn is a user
	// message and everything up to its accepted answer, so a tool call is never
	// separated from its results. It does not read the entities revealed in it: a run
	// asks for those its accept rules check (Seen), whatever their number.
	Conversation(ctx context.Context, id string, turns int) (Conversation, error)
	// Seen reports whether the entity id of a kind was revealed in the conversation
	// and is still kept (memory.max_seen): one indexed lookup, so its cost does not
	// grow with the entities the conversation has.
	Seen(ctx context.Context, conversation, kind, id string) (bool, error)
	// SeenEntities returns the entities revealed in the conversation, by kind, each
	// kind oldest first — in the order of their last revelation: the kinds named, or
	// every kind when none is. A kind without entities is absent. The map and its
	// slices belong to the caller.
	SeenEntities(ctx context.Context, conversation string, kinds ...string) (map[string][]string, error)
	// Commit writes what one run leaves behind in one transaction: a crash loses at
	// most the run in flight, and two runs on one conversation never interleave.
	Commit(ctx context.Context, rec Record) error
	// Conversations lists the user's conversation ids, newest first: by their last
	// commit.
	Conversations(ctx context.Context, userID string) ([]string, error)
	// DeleteConversation deletes a conversation of the user — its messages and the
	// entities revealed in it — in one transaction; the user's facts stay. A
	// conversation of another user, or none at all, is ErrConversationNotFound: the
	// caller cannot tell them apart, so it cannot probe for other users' ids.
	DeleteConversation(ctx context.Context, userID, id string) error
	// Forget deletes everything stored about the user: facts and conversations.
	Forget(ctx context.Context, userID string) error
	Close() error
}

// ErrForeignConversation is a commit to a conversation another user started. Runs
// check the owner when they begin; stores check again when they commit, so two users
// racing to start one conversation id cannot both write into it.
var ErrForeignConversation = errors.New("the conversation belongs to another user")

// ErrConversationNotFound is a DeleteConversation of a conversation the user does
// not have: another user's or one that does not exist.
var ErrConversationNotFound = errors.New("no such conversation")

// Conversation is what a store keeps of a conversation.
type Conversation struct {
	User     string          `json:"user,omitempty"` // who started it; "" for a new one
	Messages []model.Message `json:"messages"`
	Turns    int             `json:"turns"` // turns stored in all, not only those returned
}

// Record is what one run writes.
type Record struct {
	UserID       string
	Conversation string          // "" for a run outside any conversation: no history
	Messages     []model.Message // the accepted exchange, appended as one turn; nil for none
	// Seen holds only what this run revealed, by kind, in order — not the entities
	// of earlier runs, which the store has — so a commit costs what the run revealed,
	// whatever the conversation's size. The store merges them into the conversation's:
	// a new entity is added as the newest of its kind, one revealed before becomes the
	// newest again.
	Seen map[string][]string
	// MaxSeen caps the entities of one kind the conversation keeps (memory.max_seen):
	// beyond it the store drops the oldest of that kind in the same transaction.
	// 0 keeps them all.
	MaxSeen int
	Facts   []FactChange // applied in order
	// Pause, when set, is written in the same transaction: the run paused for
	// approvals. It is inserted if no record has its id and its Version is 1, or
	// replaces the stored record at Version-1 (the claimed record of a run that
	// resumed and pauses again); otherwise the whole commit fails with
	// ErrPausedConflict, writing nothing, so a slow execution whose claim was taken
	// over cannot overwrite the record of the one that took it. With Resumed of the
	// same id, it is inserted whatever its Version.
	Pause *PausedRun
	// Resumed, when set, is the id of a paused run this commit ends: its record is
	// deleted in the same transaction if its stored Version is ResumedVersion (the
	// claim's). If the record is missing or at another version the whole commit fails
	// with ErrPausedConflict, writing nothing: a slow execution whose claim was taken
	// over must not delete the record of the one that took it.
	Resumed        string
	ResumedVersion int
	// Key, when set, names this commit: a commit whose Key the store already
	// applied writes nothing and succeeds, so a commit retried after its reply was
	// lost is made once. Keys are kept for a while (at least a day) after their commit.
	Key string
}

// FactChange is one change to a user's facts.
type FactChange struct {
	Op       FactOp
	Key      string
	Value    string
	Source   string // tool, llm or user
	MaxChars int    // values are cut to this many characters (0: no limit)
}

// FactOp is how a FactChange changes a fact.
type FactOp string

const (
	FactSet    FactOp = "set"
	FactAppend FactOp = "append"
	FactDelete FactOp = "delete"
)

// ApplyFact computes a fact's new value: append joins with a line break and keeps
// the newest text when the value outgrows maxChars.
func ApplyFact(old string, c FactChange) string {
	v := c.Value
	if c.Op == FactAppend && old != "" {
		v = old + "\n" + c.Value
	}
	if c.MaxChars > 0 {
		r := []rune(v)
		if len(r) > c.MaxChars {
			if c.Op == FactAppend {
				v = string(r[len(r)-c.MaxChars:])
			} else {
				v = string(r[:c.MaxChars])
			}
		}
	}
	return v
}

// Activity is when a conversation was last written, for listing them.
type Activity struct {
	ID      string
	Updated time.Time
}

// NewestFirst orders conversations by their last write, newest first (ties by id),
// and returns their ids: Store.Conversations' order.
func NewestFirst(convs []Activity) []string {
	slices.SortFunc(convs, func(a, b Activity) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	out := make([]string, 0, len(convs))
	for _, c := range convs {
		out = append(out, c.ID)
	}
	return out
}
