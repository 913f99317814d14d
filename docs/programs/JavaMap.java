// A JVM heap for `ccvm exec` and `ccvm bench kernel --program`, run as a
// single source file (`java -XX:+UseSerialGC docs/programs/JavaMap.java`):
// a HashMap of a million boxed keys and strings, then a third of them read
// back. The JVM reserves its heap PROT_NONE and commits it with fixed
// mappings over the reservation, the pattern ccvm's preloaded library
// pages (its `vm` module). Prints the map's size and a checksum.
public class JavaMap {
    public static void main(String[] args) {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
        var m = new java.util.HashMap<Integer, String>();
        for (int i = 0; i < n; i++) m.put(i, "v" + i * 7);
        long s = 0;
        for (int i = 0; i < n; i += 3) s += m.get(i).length();
        System.out.println(m.size() + " " + s);
    }
}
