// A Go program linked with cgo (so dynamically, through the C library)
// for `ccvm exec`'s tests: a map of 300k records built, its keys sorted,
// then read by four goroutines, whose preemption (SIGURG) and system calls
// come while they run on stacks in the paged heap. Prints checksums.
package main

// #include <stdlib.h>
import "C"

import (
	"fmt"
	"hash/crc32"
	"sort"
	"sync"
)

type rec struct {
	id   int
	name string
	vals []int
}

func main() {
	m := map[string]*rec{}
	for i := 0; i < 300000; i++ {
		k := fmt.Sprintf("key-%d-%x", i, (i*2654435761)%1000003)
		m[k] = &rec{id: i, name: k + "-name", vals: []int{i, i * 3, i * 7, i % 13}}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var wg sync.WaitGroup
	sums := make([]uint32, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			h := crc32.NewIEEE()
			for j := w; j < len(keys); j += 4 {
				r := m[keys[j]]
				fmt.Fprintf(h, "%s %d %d\n", r.name, r.id, r.vals[1]+r.vals[3])
			}
			sums[w] = h.Sum32()
		}(w)
	}
	wg.Wait()
	fmt.Println(len(m), sums)
}
