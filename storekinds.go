package agentrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	kpostgres "github.com/agentrun/agentrun/runtime/knowledge/index/postgres"
	ksqlite "github.com/agentrun/agentrun/runtime/knowledge/index/sqlite"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/store/postgres"
	"github.com/agentrun/agentrun/runtime/store/redis"
	"github.com/agentrun/agentrun/runtime/store/sqlite"
	"github.com/agentrun/agentrun/spec"
)

// storeKind is one kind of memory store: how to open one, bring its schema up to
// date, and say where it keeps its state. spec.StoreKindOf says which kind a URL
// names (its schemes); OpenStore, MigrateStore and StatePlace, the assembly's and
// the CLI's, read this table, so a new store is a row here and a constant there.
type storeKind struct {
	open func(url string, ttl time.Duration) (store.Store, error)
	// migrate applies the migrations the store's schema lacks and says what it
	// did, a line each; nil for a kind without a schema.
	migrate func(ctx context.Context, url string) ([]string, error)
	// place says where a store of the kind is, for a person: never a server's
	// URL, which may carry a password.
	place func(url string) string
}

var storeKinds = map[spec.StoreKind]storeKind{
	spec.StoreMemory: {
		open:  func(string, time.Duration) (store.Store, error) { return memory.New(), nil },
		place: func(string) string { return "in this process" },
	},
	spec.StoreSQLite: {open: openSQLite, migrate: migrateSQLite, place: filePlace},
	spec.StoreRedis: {
		open: func(url string, ttl time.Duration) (store.Store, error) {
			return redis.Open(url, redis.Options{TTL: ttl})
		},
		place: func(string) string { return "on " + string(spec.StoreRedis) },
	},
	spec.StorePostgres: {
		open: func(url string, ttl time.Duration) (store.Store, error) {
			// Connecting and migrating on first use; the pool's statement_timeout
			// bounds each statement afterwards.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := postgres.Open(ctx, url, ttl)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		migrate: migratePostgres,
		place:   func(string) string { return "on " + string(spec.StorePostgres) },
	},
}

// OpenStore opens the store a URL names.
func OpenStore(url string, ttl time.Duration) (store.Store, error) {
	kind, err := spec.StoreKindOf(url)
	if err != nil {
		return nil, err
	}
	return storeKinds[kind].open(url, ttl)
}

// MigrateStore brings the schema of the store a URL names up to date, as opening
// it does on first use (on PostgreSQL the knowledge index's tables too), and says
// what it did, a line each.
func MigrateStore(ctx context.Context, url string) ([]string, error) {
	kind, err := spec.StoreKindOf(url)
	if err != nil {
		return nil, err
	}
	if m := storeKinds[kind].migrate; m != nil {
		return m(ctx, url)
	}
	return []string{fmt.Sprintf("%s: no schema, nothing to migrate", kind)}, nil
}

// StatePlace shows a store URL or a knowledge index location: a file's path,
// relative to the working directory when it is below it; "in this process" for
// memory; only the kind for a server.
func StatePlace(location string) string {
	if kind, err := spec.StoreKindOf(location); err == nil {
		return storeKinds[kind].place(location)
	}
	return filePlace(location)
}

func openSQLite(url string, _ time.Duration) (store.Store, error) {
	path, err := store.SQLitePath(url)
	if err != nil {
		return nil, err
	}
	return sqlite.Open(path)
}

// migrateSQLite opens the file, which migrates it under SQLite's write lock.
func migrateSQLite(_ context.Context, url string) ([]string, error) {
	path, err := store.SQLitePath(url)
	if err != nil {
		return nil, err
	}
	s, err := sqlite.Open(path)
	if err != nil {
		return nil, err
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	return []string{fmt.Sprintf("sqlite: %s at version %d", path, sqlite.Version)}, nil
}

func migratePostgres(ctx context.Context, url string) ([]string, error) {
	m, err := postgres.Migrate(ctx, url)
	if err != nil {
		return nil, err
	}
	out := []string{fmt.Sprintf("postgres: schema %s at version %d (applied %d)", m.Schema, m.Version, m.Applied)}
	// The knowledge index may share the database: its tables are brought up to
	// date too, so a roll-out migrates everything at once.
	version, applied, err := indexKindOf(url).migrate(ctx, url)
	if err != nil {
		return out, err
	}
	return append(out, fmt.Sprintf("postgres: knowledge tables in schema %s at version %d (applied %d)", m.Schema, version, applied)), nil
}

// filePlace is a file's path (a sqlite: URL's or a plain one), relative to the
// working directory when it is below it.
func filePlace(location string) string {
	file, err := store.SQLitePath(location)
	if err != nil {
		return location
	}
	if cwd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(cwd, file); err == nil && filepath.IsLocal(rel) {
			return rel
		}
	}
	return file
}

// indexKind is one storage of the knowledge index. indexKinds is the one place
// that names their packages.
type indexKind struct {
	// owns reports whether a location names an index of this kind; the last
	// kind, a file, owns every location the others do not.
	owns func(location string) bool
	// url: a location is a URL, taken as it is, never a path relative to the spec.
	url  bool
	open func(ctx context.Context, location string) (KnowledgeIndex, error)
	// migrate brings the index's tables up to date; nil for a file, which
	// opening migrates.
	migrate func(ctx context.Context, url string) (version, applied int, err error)
}

var indexKinds = []indexKind{
	{owns: kpostgres.IsURL, url: true, migrate: kpostgres.Migrate,
		open: func(ctx context.Context, location string) (KnowledgeIndex, error) {
			return kpostgres.Open(ctx, location)
		}},
	{owns: func(string) bool { return true },
		open: func(_ context.Context, location string) (KnowledgeIndex, error) { return ksqlite.Open(location) }},
}

var (
	_ KnowledgeIndex = (*ksqlite.Index)(nil)
	_ KnowledgeIndex = (*kpostgres.Index)(nil)
)

func indexKindOf(location string) indexKind {
	for _, k := range indexKinds {
		if k.owns(location) {
			return k
		}
	}
	return indexKinds[len(indexKinds)-1]
}

// OpenIndex opens the knowledge index at location (see IndexPath): a postgres:// or
// postgresql:// URL (its schema parameter names the schema, default agentrun), else
// an index file.
func OpenIndex(ctx context.Context, location string) (KnowledgeIndex, error) {
	return indexKindOf(location).open(ctx, location)
}
