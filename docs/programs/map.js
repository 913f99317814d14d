// A V8 heap for `ccvm exec` and `ccvm bench kernel --program`: a Map of
// 1.5 million small objects (about 300 MB resident unpaged), then a third
// of them read back. V8 reserves its heap PROT_NONE and commits it with
// mprotect, the pattern ccvm's preloaded library pages (its `vm` module).
// Prints the map's size and a checksum.
const n = Number(process.argv[2] || 1500000);
const m = new Map();
for (let i = 0; i < n; i++) m.set('k' + i, { a: i, b: 'v' + i * 7 });
let s = 0;
for (let i = 0; i < n; i += 3) s += m.get('k' + i).a;
console.log(m.size, s);
