package spec

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// An eval dataset is read whole when the eval file loads, so it is bounded: 16 MiB
// and 10,000 rows are far more than an eval run can afford to call a model for.
const (
	MaxDatasetSize = 16 << 20
	MaxDatasetRows = 10_000
	// maxRowErrors stops a dataset's row diagnostics: a wrong column mapping would
	// otherwise report every row.
	maxRowErrors = 20
)

// datasetRow is a row's values by column, and where it starts in its file.
type datasetRow struct {
	line int
	cols map[string]string
	keys []string // in the file's order, for hints
}

// datasetReader collects a dataset file's rows and its diagnostics, each at the
// file's own line.
type datasetReader struct {
	d      *document
	file   string // the dataset's path
	path   string // the YAML path of the dataset, for diagnostics
	errors int
}

func (r *datasetReader) errorAt(line, col int, hint, format string, args ...any) {
	r.errors++
	if r.errors > maxRowErrors {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if r.errors == maxRowErrors {
		msg += " (and further rows are not reported)"
	}
	r.d.diags = append(r.d.diags, Diagnostic{Severity: Error, Pos: Pos{File: r.file, Line: line, Col: max(col, 1)}, Path: r.path, Message: msg, Hint: hint})
}

// loadDataset reads the i-th dataset and makes a case of each good row.
func (d *document) loadDataset(f *EvalFile, i int) []EvalCase {
	ds := &f.Datasets[i]
	di := strconv.Itoa(i)
	fileAt := d.at("datasets", di, "file")
	if ds.File == "" || d.failed[fileAt.path] {
		return nil
	}
	path := ds.File
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(d.file), path)
	}
	src, err := ReadFile(path, MaxDatasetSize)
	if err != nil {
		var tooLarge *TooLargeError
		if errors.As(err, &tooLarge) {
			d.errorf(fileAt, "split it, or sample it: every row is a case that calls the model", "dataset %s: %s", ds.File, ioMessage(err))
		} else {
			d.errorf(fileAt, "the path is relative to the eval file", "dataset %s: %s", ds.File, ioMessage(err))
		}
		return nil
	}
	r := &datasetReader{d: d, file: path, path: "datasets[" + di + "]"}
	var rows []datasetRow
	if strings.HasSuffix(ds.File, ".csv") {
		var header []string
		rows, header = r.readCSV(src)
		if header != nil && !d.checkColumns(ds, di, header) {
			return nil
		}
	} else {
		rows = r.readJSONL(src)
	}
	if len(rows) == 0 && r.errors == 0 {
		d.warnf(fileAt, "every row of a dataset is a case", "dataset %s has no rows", ds.File)
	}
	var cases []EvalCase
	for _, row := range rows {
		if c, ok := r.rowCase(ds, di, row); ok {
			cases = append(cases, c)
		}
	}
	return cases
}

// readJSONL reads one JSON object a line; blank lines are skipped.
func (r *datasetReader) readJSONL(src []byte) []datasetRow {
	var rows []datasetRow
	for n, line := range bytes.Split(src, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if len(rows) == MaxDatasetRows {
			r.errorAt(n+1, 1, "split the dataset, or sample it", "more than %d rows", MaxDatasetRows)
			break
		}
		row, col, err := jsonRow(line)
		if err != nil {
			r.errorAt(n+1, col, "each line of a .jsonl file is one JSON object, such as {\"input\": \"…\"}", "%v", err)
			continue
		}
		row.line = n + 1
		rows = append(rows, row)
	}
	return rows
}

// jsonRow decodes one JSONL line; on error, col is where it went wrong.
func jsonRow(line []byte) (datasetRow, int, error) {
	// Unmarshal first: its syntax errors carry their offset in the line.
	if err := json.Unmarshal(line, new(any)); err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se) && se.Error() == "unexpected end of JSON input":
			return datasetRow{}, len(line) + 1, errors.New("the JSON value is not closed on its line")
		case errors.As(err, &se):
			return datasetRow{}, int(se.Offset), fmt.Errorf("invalid JSON: %v", err)
		}
		return datasetRow{}, 1, err
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return datasetRow{}, 1, fmt.Errorf("a row is a JSON object, got %s", jsonKind(tok))
	}
	row := datasetRow{cols: map[string]string{}}
	for dec.More() {
		kt, _ := dec.Token()
		key, _ := kt.(string)
		var v any
		_ = dec.Decode(&v) // the line is valid JSON
		if _, dup := row.cols[key]; !dup {
			row.keys = append(row.keys, key)
		}
		row.cols[key] = ValueText(v)
	}
	return row, 0, nil
}

func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// ValueText is a JSON value as text: a string as it is, null as "", any other
// value as its JSON (a dataset's cell as a case's text, a workflow step's
// fallback as its text).
func ValueText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// readCSV reads a header row and the rows under it.
func (r *datasetReader) readCSV(src []byte) ([]datasetRow, []string) {
	cr := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(src, []byte("\uFEFF"))))
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			r.errorAt(1, 1, "the first row names the columns: input,name,…", "the CSV file has no header row")
		} else {
			r.csvError(err)
		}
		return nil, nil
	}
	seen := map[string]bool{}
	for i, h := range header {
		line, col := cr.FieldPos(i)
		switch {
		case h == "":
			r.errorAt(line, col, "every column needs a name", "column %d of the header has no name", i+1)
		case seen[h]:
			r.errorAt(line, col, "every column needs a name of its own", "column %q is in the header twice", h)
		}
		seen[h] = true
	}
	var rows []datasetRow
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if r.csvError(err) {
				continue
			}
			break
		}
		line, _ := cr.FieldPos(0)
		if len(rows) == MaxDatasetRows {
			r.errorAt(line, 1, "split the dataset, or sample it", "more than %d rows", MaxDatasetRows)
			break
		}
		row := datasetRow{line: line, cols: map[string]string{}, keys: header}
		for i, v := range rec {
			row.cols[header[i]] = v
		}
		rows = append(rows, row)
	}
	return rows, header
}

// csvError reports a CSV error and whether reading can go on (a row with the
// wrong number of fields) or not (broken quoting).
func (r *datasetReader) csvError(err error) bool {
	var pe *csv.ParseError
	if !errors.As(err, &pe) {
		r.errorAt(1, 1, "", "%v", err)
		return false
	}
	if errors.Is(pe.Err, csv.ErrFieldCount) {
		r.errorAt(pe.Line, 1, "every row has as many fields as the header", "%v", pe.Err)
		return true
	}
	r.errorAt(pe.Line, pe.Column, `quote a field holding , or " as "…", doubling a " inside`, "%v", pe.Err)
	return false
}

// checkColumns reports the mapped columns a CSV header lacks, at the eval file's
// map; false when one is missing, which every row would repeat.
func (d *document) checkColumns(ds *EvalDataset, di string, header []string) bool {
	ok := true
	check := func(col string, tokens ...string) {
		if col == "" || slices.Contains(header, col) {
			return
		}
		ok = false
		hint := "the header has " + strings.Join(header, ", ")
		if c := Closest(col, header); c != "" {
			hint = fmt.Sprintf("did you mean %q?", c)
		}
		d.errorf(d.at(append([]string{"datasets", di, "map"}, tokens...)...), hint, "%s has no column %q", ds.File, col)
	}
	check(ds.Map.Name, "name")
	check(ds.Map.User, "user")
	if ds.Map.Input == "" && !slices.Contains(header, "input") {
		ok = false
		d.errorf(d.at("datasets", di), "map: {input: COLUMN} names the column of the user's message; the header has "+strings.Join(header, ", "), "%s has no column \"input\"", ds.File)
	}
	check(ds.Map.Input, "input")
	for _, attr := range sortedKeys(ds.Map.Context) {
		check(ds.Map.Context[attr], "context", attr)
	}
	return ok
}

// rowCase is the case a row makes, or false with the row's problems reported.
func (r *datasetReader) rowCase(ds *EvalDataset, di string, row datasetRow) (EvalCase, bool) {
	c := EvalCase{
		Source:  Source{Pos: Pos{File: r.file, Line: row.line, Col: 1}, Path: "datasets[" + di + "]"},
		Expect:  ds.Expect,
		Graders: ds.Graders,
		Dataset: ds.File,
	}
	ok := true
	value := func(col, what string, required bool) string {
		v, has := row.cols[col]
		if !has && required {
			ok = false
			hint := "the row has " + strings.Join(row.keys, ", ")
			if s := Closest(col, row.keys); s != "" {
				hint = fmt.Sprintf("did you mean %q?", s)
			}
			r.errorAt(row.line, 1, hint, "the row has no %q (the %s column)", col, what)
		}
		return v
	}
	input := cmp.Or(ds.Map.Input, "input")
	if c.Input = value(input, "input", true); c.Input == "" && ok {
		ok = false
		r.errorAt(row.line, 1, "every row is a run: it needs the user's message", "the row's %q is empty", input)
	}
	if c.Name = value(cmp.Or(ds.Map.Name, "name"), "name", ds.Map.Name != ""); c.Name == "" {
		c.Name = filepath.Base(ds.File) + ":" + strconv.Itoa(row.line)
	}
	c.User = value(cmp.Or(ds.Map.User, "user"), "user", ds.Map.User != "")
	for _, attr := range sortedKeys(ds.Map.Context) {
		if c.Context == nil {
			c.Context = map[string]string{}
		}
		c.Context[attr] = value(ds.Map.Context[attr], "context."+attr, true)
	}
	return c, ok
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
