package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// WriteParams are the writer's connection settings. busy_timeout comes first so the
// others wait for the lock too; _txlock=immediate takes the write lock at BEGIN, so
// two writers never both read and then deadlock upgrading to write.
const WriteParams = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"

// Config says how Open opens one kind of file.
type Config struct {
	// What names the database in errors ("sqlite store").
	What string
	// ReadParams are the readers' connection settings.
	ReadParams string
	// Readers bounds the readers' connections.
	Readers int
	// Migrations bring the schema from version i to i+1 (see Migrate).
	Migrations []string
	// AppID, when not 0, stamps the file's application_id (see Migrate).
	AppID int
	// OtherDatabase, when set, replaces ErrOtherDatabase in Open's error, to say
	// what the file is not.
	OtherDatabase error
}

// DB is an open file: Write has a single connection, so this process's writers
// queue in database/sql instead of spinning in SQLite's busy handler (other
// processes are held off by busy_timeout and the IMMEDIATE transactions); Read
// serves readers, which WAL lets run alongside the writer.
type DB struct {
	Write, Read *sql.DB
}

// Open opens the file at path, creating it (mode 0600, so that conversations and
// facts about users are not world-readable; SQLite gives its -wal and -shm files
// the same mode) and its parent directories when missing, and applies the
// migrations it lacks.
func Open(path string, c Config) (*DB, error) {
	if path == "" {
		return nil, fmt.Errorf("%s: no file name", c.What)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", c.What, path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("%s: %w", c.What, err)
	}
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.What, err)
	}
	f.Close()

	db := &DB{}
	if db.Write, err = sql.Open("sqlite", FileURI(abs)+"?"+WriteParams); err != nil {
		return nil, fmt.Errorf("%s %s: %w", c.What, path, err)
	}
	db.Write.SetMaxOpenConns(1)
	if db.Read, err = sql.Open("sqlite", FileURI(abs)+"?"+c.ReadParams); err != nil {
		db.Write.Close()
		return nil, fmt.Errorf("%s %s: %w", c.What, path, err)
	}
	db.Read.SetMaxOpenConns(c.Readers)
	if err := Migrate(context.Background(), db.Write, c.Migrations, c.AppID); err != nil {
		db.Close()
		if c.OtherDatabase != nil && errors.Is(err, ErrOtherDatabase) {
			err = c.OtherDatabase
		}
		return nil, fmt.Errorf("%s %s: %w", c.What, path, err)
	}
	return db, nil
}

// Close closes both pools.
func (db *DB) Close() error {
	return errors.Join(db.Read.Close(), db.Write.Close())
}

// FileURI turns an absolute path into a SQLite file: URI. The path is
// percent-escaped so that '?', '#' or '%' in a name cannot end the path and smuggle
// DSN parameters (whose _pragma values run as SQL).
func FileURI(abs string) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive path: file:/C:/dir/x.db
	}
	return "file:" + (&url.URL{Path: p}).EscapedPath()
}
