package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrNewerSchema reports a database written by a newer agentrun, whose schema this
// one does not know.
var ErrNewerSchema = errors.New("the database was written by a newer agentrun")

// Migrate applies the migrations the database lacks, in one write transaction, so
// processes opening a new file at once neither both migrate nor see half a schema.
// The version is PRAGMA user_version, which is transactional like any write. With
// appID not 0 the file is also stamped with PRAGMA application_id, and a file that
// has tables but another id is refused: it is some other database.
func Migrate(ctx context.Context, db *sql.DB, migrations []string, appID int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if appID != 0 {
		var have, tables int
		if err := tx.QueryRowContext(ctx, `PRAGMA application_id`).Scan(&have); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&tables); err != nil {
			return err
		}
		if have != appID && (version != 0 || tables != 0) {
			return ErrOtherDatabase
		}
	}
	if version > len(migrations) {
		return fmt.Errorf("%w: schema version %d, this agentrun knows up to %d; upgrade agentrun",
			ErrNewerSchema, version, len(migrations))
	}
	if version == len(migrations) {
		return nil
	}
	for i := version; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	// PRAGMA takes no bound parameters; both are numbers we computed.
	stamp := fmt.Sprintf(`PRAGMA user_version = %d`, len(migrations))
	if appID != 0 {
		stamp += fmt.Sprintf(`; PRAGMA application_id = %d`, appID)
	}
	if _, err := tx.ExecContext(ctx, stamp); err != nil {
		return err
	}
	return tx.Commit()
}

// ErrOtherDatabase is a file that holds tables of another application.
var ErrOtherDatabase = errors.New("the file is another SQLite database")
