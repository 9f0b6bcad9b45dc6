// Command shop-api is the demo backend of the shop examples: the order API that
// examples/agents/shop-support.yaml, refund-specialist.yaml and order-digest.yaml
// call (through SHOP_API, which defaults to its address):
//
//	go run ./examples/shop-api                 # listens on 127.0.0.1:8081
//	go run ./examples/shop-api -addr :9000
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/agentrun/agentrun/examples/shop-api/shop"
)

func main() {
	addr := flag.String("addr", shop.DefaultAddr, "the `address` to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "shop-api: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(shop.Banner(ln.Addr().String()))
	srv := &http.Server{
		Handler:           shop.New(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "shop-api: %v\n", err)
		os.Exit(1)
	}
}
