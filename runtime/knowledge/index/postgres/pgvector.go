package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
	"github.com/jackc/pgx/v5"
)

// VectorSearch says where an index scores vectors: VectorsInProcess loads a
// collection's vectors into memory (the portable way: bytea and Go); VectorsPgvector
// scores them in the server with the pgvector extension, over an embedding column
// kept beside the bytea.
type VectorSearch string

const (
	VectorsInProcess VectorSearch = "process"
	VectorsPgvector  VectorSearch = "pgvector"
)

// vectorSearchParam is the URL parameter that chooses: process, pgvector (an error
// when the extension cannot be used) or auto (the default: pgvector when the server
// has it or lets the index create it, else in process).
const vectorSearchParam = "vector_search"

// splitVectorSearch takes the vector_search parameter out of a URL, which pgx would
// otherwise send to the server as a setting.
func splitVectorSearch(raw string) (string, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return raw, "", nil // pgdb.Open says what is wrong with it
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return raw, "", nil
	}
	mode := q.Get(vectorSearchParam)
	switch mode {
	case "", "auto", string(VectorsInProcess), string(VectorsPgvector):
	default:
		return "", "", fmt.Errorf("%s=%s: use auto, process or pgvector", vectorSearchParam, mode)
	}
	q.Del(vectorSearchParam)
	u.RawQuery = q.Encode()
	return u.String(), mode, nil
}

// enablePgvector makes the index score with pgvector: the extension (created if
// the server offers it and the role may), the embedding column, and the vectors
// stored before it existed. It returns the extension's schema, quoted.
func (x *Index) enablePgvector(ctx context.Context) (string, error) {
	ns, err := vectorSchema(ctx, x.db.Pool)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := x.db.Pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS vector`); err != nil {
			return "", fmt.Errorf("the vector extension could not be created: %w", err)
		}
		ns, err = vectorSchema(ctx, x.db.Pool)
	}
	if err != nil {
		return "", err
	}
	var has bool
	if err := x.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = 'knowledge_vectors' AND column_name = 'embedding')`, x.db.Schema).Scan(&has); err != nil {
		return "", err
	}
	if !has {
		if _, err := x.db.Pool.Exec(ctx, `ALTER TABLE knowledge_vectors ADD COLUMN IF NOT EXISTS embedding `+ns+`.vector`); err != nil {
			return "", fmt.Errorf("the embedding column could not be added: %w", err)
		}
	}
	err = pgx.BeginTxFunc(ctx, x.db.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error { return fillEmbeddings(ctx, tx, ns, "") })
	return ns, err
}

func vectorSchema(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (string, error) {
	var ns string
	err := q.QueryRow(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'`).Scan(&ns)
	return pgx.Identifier{ns}.Sanitize(), err
}

// fillEmbeddings sets the embedding column of the vectors that have none (of one
// collection, or of all when collection is ""), from their bytea.
func fillEmbeddings(ctx context.Context, tx pgx.Tx, ns, collection string) error {
	rows, err := tx.Query(ctx, `SELECT collection, hash, seq, vector FROM knowledge_vectors
		WHERE embedding IS NULL AND ($1 = '' OR collection = $1)`, collection)
	if err != nil {
		return err
	}
	type row struct {
		collection, hash string
		seq              int32
		literal          string
	}
	var todo []row
	for rows.Next() {
		var r row
		var blob []byte
		if err := rows.Scan(&r.collection, &r.hash, &r.seq, &blob); err != nil {
			rows.Close()
			return err
		}
		v := make([]float32, len(blob)/4)
		if err := index.DecodeVector(v, blob); err != nil {
			rows.Close()
			return fmt.Errorf("vector %s/%s/%d: %w", r.collection, r.hash, r.seq, err)
		}
		r.literal = vectorLiteral(v)
		todo = append(todo, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	batch := &pgx.Batch{}
	for _, r := range todo {
		batch.Queue(`UPDATE knowledge_vectors SET embedding = $4::`+ns+`.vector WHERE collection = $1 AND hash = $2 AND seq = $3`,
			r.collection, r.hash, r.seq, r.literal)
	}
	return tx.SendBatch(ctx, batch).Close()
}

// vectorLiteral is v in pgvector's text form, each component exactly as float32.
func vectorLiteral(v []float32) string {
	var b strings.Builder
	b.Grow(len(v)*10 + 2)
	b.WriteByte('[')
	for i, f := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(float64(f), 'g', -1, 32))
	}
	b.WriteByte(']')
	return b.String()
}

// scorer scores a collection's vectors against one query: in process
// (index.InProcess) or in the server (inServer); see index.Snapshot.
type scorer interface {
	Top(ctx context.Context, n int) ([]index.Scored, error)
	Best(ctx context.Context, id int64) (score float32, row int, ok bool, err error)
	BestFAQ(ctx context.Context) (id int64, score float32, row int, ok bool, err error)
}

// inServer scores with pgvector's inner product (<#> is its negation), every
// vector of the collection by the collection's embedder, in the snapshot tx.
type inServer struct {
	tx                   pgx.Tx
	ns                   string
	collection, embedder string
	q                    string // the query as a vector literal
}

// scores is every vector's score with its chunk and row: the FROM of the queries.
func (s inServer) scores() string {
	return `(SELECT c.id, c.kind, v.seq, (-(v.embedding OPERATOR(` + s.ns + `.<#>) $3::` + s.ns + `.vector))::float4 AS score
		FROM knowledge_chunks c JOIN knowledge_vectors v ON v.collection = c.collection AND v.hash = c.hash
		WHERE c.collection = $1 AND v.embedder = $2) s`
}

func (s inServer) Top(ctx context.Context, n int) ([]index.Scored, error) {
	rows, err := s.tx.Query(ctx, `SELECT id, score FROM (SELECT DISTINCT ON (id) id, score FROM `+s.scores()+`
		WHERE kind <> '`+string(knowledge.ChunkFAQ)+`' ORDER BY id, score DESC) best ORDER BY score DESC, id LIMIT $4`, s.collection, s.embedder, s.q, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (index.Scored, error) {
		var sc index.Scored
		err := r.Scan(&sc.ID, &sc.Score)
		return sc, err
	})
}

func (s inServer) Best(ctx context.Context, id int64) (float32, int, bool, error) {
	var score float32
	var row int32
	err := s.tx.QueryRow(ctx, `SELECT score, seq FROM `+s.scores()+` WHERE id = $4 ORDER BY score DESC, seq LIMIT 1`,
		s.collection, s.embedder, s.q, id).Scan(&score, &row)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, -1, false, nil
	}
	return score, int(row), err == nil, err
}

func (s inServer) BestFAQ(ctx context.Context) (int64, float32, int, bool, error) {
	var id int64
	var score float32
	var row int32
	err := s.tx.QueryRow(ctx, `SELECT id, score, seq FROM `+s.scores()+` WHERE kind = '`+string(knowledge.ChunkFAQ)+`' ORDER BY score DESC, id, seq LIMIT 1`,
		s.collection, s.embedder, s.q).Scan(&id, &score, &row)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, -1, false, nil
	}
	return id, score, int(row), err == nil, err
}
