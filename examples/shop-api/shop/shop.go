// Package shop is the demo backend of the shop examples (examples/agents): the
// food-delivery shop's order API, with a few users' orders in memory, answering
// exactly the calls the orders skill, the refund specialist and shop-support make.
// It exists so the examples can be tried end to end on a fresh clone; it is not a
// model of a real shop (no authentication: the user's id arrives in the path or in
// X-User-Id, as the agents' bound tools send it).
package shop

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
)

// DefaultAddr is where the demo listens unless told otherwise, and the address the
// examples' SHOP_API defaults to: not agentrun serve's 127.0.0.1:8080, so the two
// run side by side.
const DefaultAddr = "127.0.0.1:8081"

// Banner is the line the demo prints once it listens on addr.
func Banner(addr string) string {
	return fmt.Sprintf("shop-api: the demo shop listens on http://%s (users u-42 and u-7)", addr)
}

// Limits on what one request may carry and how many are served at once: the demo
// is small, but it listens on a port.
const (
	maxBody       = 16 << 10
	maxConcurrent = 32
)

// Item is one line of an order.
type Item struct {
	Name     string  `json:"name"`
	Quantity int     `json:"quantity"`
	Price    float64 `json:"price"`
}

// Courier is where a delivering order is.
type Courier struct {
	Name       string `json:"name"`
	Position   string `json:"position"`
	ETAMinutes int    `json:"eta_minutes"`
}

// Order is one of a user's orders, as get_order_detail returns it; the list
// returns the same without items and courier.
type Order struct {
	Number  string   `json:"number"`
	Status  string   `json:"status"` // unpaid, delivering, done or cancelled
	Amount  float64  `json:"amount"`
	Shop    string   `json:"shop"`
	Placed  string   `json:"placed"`
	Items   []Item   `json:"items,omitempty"`
	Courier *Courier `json:"courier,omitempty"`
}

// Shop holds the users' orders, addresses and refund requests; its methods are
// safe for concurrent use.
type Shop struct {
	mu        sync.Mutex
	orders    map[string][]*Order // by user id, most recent first
	addresses map[string]string
	refunds   int
	slots     chan struct{}
	mux       *http.ServeMux
}

// New returns a shop with its demo data: u-42 has a delivered order (A1001, for a
// refund), one on its way (A1002) and a large unpaid one (A1003, ¥268: cancelling
// it needs approval); u-7 has two orders.
func New() *Shop {
	s := &Shop{
		orders: map[string][]*Order{
			"u-42": {
				{Number: "A1003", Status: "unpaid", Amount: 268, Shop: "老北京烤鸭", Placed: "2026-05-12 18:05",
					Items: []Item{{Name: "烤鸭套餐（四人份）", Quantity: 1, Price: 238}, {Name: "酸梅汤", Quantity: 3, Price: 10}}},
				{Number: "A1002", Status: "delivering", Amount: 36, Shop: "兰州拉面", Placed: "2026-05-12 17:40",
					Items:   []Item{{Name: "牛肉拉面", Quantity: 1, Price: 28}, {Name: "凉拌黄瓜", Quantity: 1, Price: 8}},
					Courier: &Courier{Name: "王师傅", Position: "世纪大道与东方路路口", ETAMinutes: 12}},
				{Number: "A1001", Status: "done", Amount: 48, Shop: "喜茶", Placed: "2026-05-12 12:10",
					Items: []Item{{Name: "多肉葡萄", Quantity: 2, Price: 19}, {Name: "芝芝莓莓", Quantity: 1, Price: 10}}},
			},
			"u-7": {
				{Number: "B2002", Status: "unpaid", Amount: 25, Shop: "沙县小吃", Placed: "2026-05-12 18:20",
					Items: []Item{{Name: "拌面", Quantity: 1, Price: 10}, {Name: "蒸饺", Quantity: 1, Price: 15}}},
				{Number: "B2001", Status: "done", Amount: 120, Shop: "海底捞", Placed: "2026-05-11 19:30",
					Items: []Item{{Name: "番茄锅底", Quantity: 1, Price: 60}, {Name: "肥牛", Quantity: 2, Price: 30}}},
			},
		},
		addresses: map[string]string{"u-42": "上海市浦东新区世纪大道1号", "u-7": "北京市朝阳区建国路88号"},
		slots:     make(chan struct{}, maxConcurrent),
		mux:       http.NewServeMux(),
	}
	s.mux.HandleFunc("GET /users/{user}/orders", s.list)
	s.mux.HandleFunc("GET /users/{user}/orders/{number}", s.detail)
	s.mux.HandleFunc("POST /orders/{number}/cancel", s.cancel)
	s.mux.HandleFunc("POST /orders/{number}/refunds", s.refund)
	s.mux.HandleFunc("PUT /users/{user}/address", s.setAddress)
	return s
}

// ServeHTTP serves the API: at most maxConcurrent requests at once (the rest get
// 503 at once rather than queue), each body at most maxBody bytes.
func (s *Shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		writeError(w, http.StatusServiceUnavailable, "the shop is busy, try again")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	s.mux.ServeHTTP(w, r)
}

// list answers list_recent_orders: {"orders": [...]}, filtered by ?status (any,
// or one status).
func (s *Shop) list(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	s.mu.Lock()
	defer s.mu.Unlock()
	orders := []Order{}
	for _, o := range s.orders[r.PathValue("user")] {
		if status == "" || status == "any" || o.Status == status {
			orders = append(orders, Order{Number: o.Number, Status: o.Status, Amount: o.Amount, Shop: o.Shop, Placed: o.Placed})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"orders": orders})
}

// detail answers get_order_detail: the whole order, when it is this user's.
func (s *Shop) detail(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.find(r.PathValue("user"), r.PathValue("number"))
	if o == nil {
		writeError(w, http.StatusNotFound, "no such order")
		return
	}
	writeJSON(w, http.StatusOK, o)
}

// cancel answers cancel_order: only the user's own unpaid orders can be cancelled.
func (s *Shop) cancel(w http.ResponseWriter, r *http.Request) {
	s.onOwnOrder(w, r, func(o *Order, _ string) {
		if o.Status != "unpaid" {
			writeError(w, http.StatusConflict, fmt.Sprintf("order %s is %s: only unpaid orders can be cancelled", o.Number, o.Status))
			return
		}
		o.Status, o.Courier = "cancelled", nil
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "number": o.Number, "status": o.Status})
	})
}

// refund answers request_refund: a delivered order of the user's gets a refund
// request; above ¥200 it is reviewed by a person.
func (s *Shop) refund(w http.ResponseWriter, r *http.Request) {
	s.onOwnOrder(w, r, func(o *Order, reason string) {
		switch {
		case o.Status != "done":
			writeError(w, http.StatusConflict, fmt.Sprintf("order %s is %s: only delivered orders can be refunded", o.Number, o.Status))
		case reason == "":
			writeError(w, http.StatusBadRequest, "say what was wrong with the order")
		default:
			s.refunds++
			status := "approved"
			if o.Amount > 200 {
				status = "in review"
			}
			writeJSON(w, http.StatusOK, map[string]any{"ok": true, "refund": fmt.Sprintf("R-%d", 76+s.refunds), "order": o.Number, "status": status})
		}
	})
}

// onOwnOrder is what cancel and refund share: it reads the {"reason"} body and, with
// s.mu held, hands act the order the path names if it is the calling user's
// (X-User-Id), else answers 404 — someone else's order is as unknown as a missing one.
func (s *Shop) onOwnOrder(w http.ResponseWriter, r *http.Request, act func(o *Order, reason string)) {
	var body struct {
		Reason string `json:"reason"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.find(r.Header.Get("X-User-Id"), r.PathValue("number"))
	if o == nil {
		writeError(w, http.StatusNotFound, "no such order")
		return
	}
	act(o, body.Reason)
}

// setAddress answers update_address: the user's default delivery address.
func (s *Shop) setAddress(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Address string `json:"address"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	user := r.PathValue("user")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.orders[user]; !ok {
		writeError(w, http.StatusNotFound, "no such user")
		return
	}
	if len([]rune(body.Address)) < 5 {
		writeError(w, http.StatusBadRequest, "the address is too short")
		return
	}
	s.addresses[user] = body.Address
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "address": body.Address})
}

// find is the user's order with that number, or nil; s.mu is held.
func (s *Shop) find(user, number string) *Order {
	i := slices.IndexFunc(s.orders[user], func(o *Order) bool { return o.Number == number })
	if i < 0 {
		return nil
	}
	return s.orders[user][i]
}

// readJSON decodes the request's body into v, or answers 400 (413 when too large)
// and reports false.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(r.Body).Decode(v)
	if err == nil {
		return true
	}
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, "the request body is too large")
	} else {
		writeError(w, http.StatusBadRequest, "the body is not JSON")
	}
	return false
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to tell it
}
