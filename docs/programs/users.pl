#!/usr/bin/perl
# An in-memory table of generated user records, then skewed lookups that
# update them: most of the memory is cold, as in a service's cache.
use strict;
use warnings;

my $n = $ARGV[0] // 250_000;
my $queries = $ARGV[1] // 1_500_000;
my $x = 12345;
sub rnd { $x = ($x * 1103515245 + 12345) % 2147483648; return $x >> 8; }
my @words = qw(alpha beta gamma delta omega sigma kappa lambda theta zeta);
my %users;
for my $i (0 .. $n - 1) {
    my $name = sprintf("user%07d", $i);
    $users{$name} = {
        id    => $i,
        email => "$name\@example.org",
        score => rnd() % 1000,
        tags  => [ map { "t" . (rnd() % 5000) } 1 .. 4 ],
        bio   => join(" ", map { $words[rnd() % 10] } 1 .. 12),
    };
}
my $sum = 0;
for my $q (1 .. $queries) {
    my $i = rnd() % 1000 < 900 ? rnd() % int($n / 20) : rnd() % $n;
    my $u = $users{ sprintf("user%07d", $i) };
    $u->{score}++;
    push @{ $u->{tags} }, "q$q" if $q % 97 == 0;
    $sum = ($sum + $u->{score} + length($u->{bio})) % 1000000007;
}
print "$sum\n";
