# A session store in Tcl: 350,000 generated sessions in an array, then
# 2 million requests, four in five to a window of recent sessions that
# slides through the store, the rest anywhere; one request in four
# updates its session.
proc build {n} {
    global s
    for {set i 0} {$i < $n} {incr i} {
        set s($i) [list user$i [expr {($i * 7919) % 100003}] \
            "agent-[expr {$i % 97}]-[format %x [expr {($i * 2654435761) % 4294967296}]]" \
            [string repeat [format %c [expr {97 + $i % 26}]] [expr {8 + $i % 24}]]]
    }
}
proc serve {n requests} {
    global s
    expr {srand(11)}
    set total 0
    for {set q 0} {$q < $requests} {incr q} {
        set window [expr {($q * $n) / $requests}]
        if {rand() < 0.8} {
            set i [expr {($window + int(rand() * 20000)) % $n}]
        } else {
            set i [expr {int(rand() * $n)}]
        }
        set rec $s($i)
        incr total [lindex $rec 1]
        if {$q % 4 == 0} { lset s($i) 1 [expr {[lindex $rec 1] + 1}] }
    }
    return $total
}
build 350000
puts [serve 350000 2000000]
