package runtime

// CacheOutcome is what the FAQ cache did for a run.
type CacheOutcome string

const (
	CacheHitOutcome  CacheOutcome = "hit"  // the cache answered: no model call
	CacheMissOutcome CacheOutcome = "miss" // looked up, nothing good enough
)

// CacheOutcomes lists every cache outcome.
var CacheOutcomes = []CacheOutcome{CacheHitOutcome, CacheMissOutcome}
