// Package redis is the store.Store on a Redis server (github.com/redis/go-redis/v9):
// for agents served by several processes that share their memory, with optional
// expiry of conversations. Open takes a redis:// or rediss:// URL (see spec.StoreKindOf).
//
// # Key layout
//
// Every key starts with Options.Prefix ("agentrun:" by default). Ids, user ids and
// entity kinds are escaped ('%' → "%25", ':' → "%3A") so that ':' only ever separates
// the parts of a key and no two ids share a key.
//
//	<prefix>conv:<id>:turns          LIST   one JSON array of model.Message per turn, oldest first
//	<prefix>conv:<id>:meta           HASH   user (its owner), turns (count), updated (RFC 3339, UTC),
//	                                        reveals (entities revealed so far, counted)
//	<prefix>conv:<id>:seen           SET    the entity kinds revealed in the conversation
//	<prefix>conv:<id>:seen:<kind>    ZSET   the entity ids of one kind, each scored by the reveals
//	                                        count of its last revelation
//	<prefix>user:<user>:facts        HASH   fact key → JSON {"value", "source", "updated"}
//	<prefix>user:<user>:conversations SET   the ids of the conversations the user owns
//	<prefix>run:<id>:paused          HASH   a paused run: user, agent, status, version,
//	                                        created and expires (RFC 3339, UTC), state (JSON)
//	<prefix>user:<user>:paused       ZSET   the ids of the user's paused runs, scored by created
//	                                        (Unix milliseconds)
//	<prefix>paused:expires           ZSET   the ids of every paused run, scored by expires
//	                                        (Unix milliseconds)
//	<prefix>blob:<key>               STRING a blob (store.Blobs), its ttl the key's expiry (PX)
//	<prefix>commit:<key>             STRING "1": the commit of Record.Key <key> was made; expires
//	                                        after a week
//
// A commit adds only the entities its run revealed, each with the next score, and
// drops the lowest scored beyond Record.MaxSeen. Seen asks for one entity's score
// (ZSCORE, SISMEMBER on a layout 1 set); SeenEntities reads whole kinds (ZRANGE);
// Conversation reads neither. Before the sorted sets (layout 1),
// seen:<kind> were plain sets and meta had no reveals: such a conversation reads as
// before, its entities in sorted order, and its next commit converts the sets, their
// entities becoming the oldest. All processes sharing a server must run a version
// with the same layout: an older one fails with WRONGTYPE on a converted conversation.
//
// Conversations lists the ids of the user's set newest first, by their meta's updated
// time. DeleteConversation removes every key of one conversation and its id from the
// owner's set in one MULTI/EXEC, watching its meta as Forget does.
//
// A paused run's keys are written and deleted by the commits of its executions
// (Record.Pause, Record.Resumed), in their MULTI/EXEC, which watches the run's hash
// for its version, which the commit checks, and for the user whose index loses it.
// UpdatePaused is a compare and swap: it reads the version under WATCH and writes in
// MULTI/EXEC only over the version before its own.
// PausedRuns reads ids from an index — with a limit, on through the ids sharing the
// last one's millisecond — then the hashes, and orders them to the nanosecond. Forget
// deletes the user's paused runs; DeleteConversation leaves them.
// Blobs belong to no user: Forget leaves them, and they go when their ttl ends.
// A commit with a Key watches its commit key, ends with nothing written when it is
// set, and sets it in its MULTI/EXEC; Forget leaves these keys, which hold no user's
// data and expire.
//
// A conversation belongs to the user of its first commit, as in the memory store.
// With Options.TTL set, each commit resets the expiry of every key of the
// conversation and of the user's conversation set; facts and paused runs are
// long-term and never expire: a paused run waits for people until it resumes. The keys of one commit are written in one MULTI/EXEC, so the store needs a
// single Redis server (not Redis Cluster, where they would fall into different slots).
//
// redis imports runtime for its types only; it must not import cmd.
package redis
