#!/usr/bin/env perl
# The host wrappers of an Ascend C kernel file: the host functions that launch its kernels with
# `KERNEL<<<blockDim, l2ctrl, stream>>>(args...)`. CANN's compiler takes a kernel file as
# mixed source (device and host code in one file); npusim compiles the two sides apart, so this
# finds the host side, in the two shapes samples write it:
#   - a block inside `#ifndef __CCE_KT_TEST__` / `#ifndef ASCENDC_CPU_DEBUG` (or the
#     `#if !defined(...)` forms) holding a launch: the whole block is host code;
#   - a top-level function (not in such a block) whose body holds a launch.
#
#   ascendc-host-wrappers.pl --blank   FILE   the source with the host wrappers blanked (every
#                                             other character and every line kept, so the
#                                             device compile's line numbers are the file's)
#   ascendc-host-wrappers.pl --extract FILE   the host wrappers, with each launch rewritten as
#                                             a call of KERNEL's generated launcher,
#                                             `(void)(l2ctrl), aclrtlaunch_KERNEL(blockDim,
#                                             stream, args...)`; NPUSIM_KERNELS (space-
#                                             separated) names the kernels that have one
#
# Exit status 1, with a message naming the file, line and kernel, for a launch of a kernel that
# has no launcher; 2 for a usage error. The file is only read.
use strict;
use warnings;

my ($mode, $file) = @ARGV;
if (!defined $file || ($mode ne '--blank' && $mode ne '--extract')) {
    print STDERR "usage: $0 --blank|--extract KERNEL.cpp\n";
    exit 2;
}
open(my $fh, '<', $file) or do { print STDERR "ascendc-host-wrappers: $file: $!\n"; exit 2 };
my $src = do { local $/; <$fh> };
close $fh;

# What the search reads: comments, string and character literals replaced by spaces (newlines
# kept), so every offset in it is the same offset in the source.
my $scan = $src;
$scan =~ s{//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'}{ $& =~ s/[^\n]/ /gr }gse;

# The host-wrapper regions, as [start, end) offsets in source order.
my @regions;
my $guard = qr/^[ \t]*#\s*(?:ifndef\s+(?:__CCE_KT_TEST__|ASCENDC_CPU_DEBUG)|if\s+!\s*defined\s*\(?\s*(?:__CCE_KT_TEST__|ASCENDC_CPU_DEBUG)\s*\)?)[^\n]*\n/m;
while ($scan =~ /$guard(.*?)^[ \t]*#\s*(?:endif|else)\b/gsm) {
    my ($from, $to, $block) = ($-[1], $+[1], $1);
    push @regions, [$from, $to] if $block =~ /<<</;
}
# Top-level functions outside those regions: a definition starts after the last `;`, `}` or
# preprocessor line at brace depth 0 and ends at the `}` that closes its body.
my $outside = $scan;
substr($outside, $_->[0], $_->[1] - $_->[0]) =~ s/[^\n]/ /g for @regions;
$outside =~ s{^[ \t]*#[^\n]*}{ $& =~ s/./ /gr }gme;    # preprocessor lines: boundaries
my ($depth, $start, $body) = (0, 0, 0);
my @functions;
while ($outside =~ /([;{}]|<<<|^[ \t]*\n|\A)/gm) {
    my ($tok, $at) = ($1, $-[1]);
    if ($tok eq '{') {
        $body = $at if $depth == 0;
        $depth++;
    } elsif ($tok eq '}') {
        $depth-- if $depth > 0;
        if ($depth == 0) {
            my $end = $+[1];
            push @functions, [$start, $end] if substr($outside, $body, $end - $body) =~ /<<</;
            $start = $end;
        }
    } elsif ($tok eq ';' && $depth == 0) {
        $start = $+[1];
    }
}
# A definition's start is its first non-blank character after the boundary.
for my $f (@functions) {
    pos($outside) = $f->[0];
    $f->[0] = $-[0] if $outside =~ /\G\s*\K\S/g;
}
@regions = sort { $a->[0] <=> $b->[0] } (@regions, @functions);

if ($mode eq '--blank') {
    my $out = $src;
    substr($out, $_->[0], $_->[1] - $_->[0]) =~ s/[^\n]/ /g for @regions;
    print $out;
    exit 0;
}

my %kernels = map { $_ => 1 } split /\s+/, ($ENV{NPUSIM_KERNELS} // '');
# The text taken is the source with its comments blanked (a launch inside a comment is none).
my $text = $src;
$text =~ s{//[^\n]*|/\*.*?\*/}{ $& =~ s/[^\n]/ /gr }gse;
my $out = '';
for my $r (@regions) {
    my $kept = substr($text, $r->[0], $r->[1] - $r->[0]);
    $kept =~ s{(\w+)\s*<<<\s*([^,>]+?)\s*,\s*([^,>]+?)\s*,\s*([^>]+?)\s*>>>\s*\(\s*(\)?)}{
        my ($k, $b, $l2, $st, $empty) = ($1, $2, $3, $4, $5);
        unless ($kernels{$k}) {
            my $line = 1 + (substr($src, 0, $r->[0] + $-[0]) =~ tr/\n//);
            print STDERR "npusim-ascendc: $file:$line: $k<<<...>>>: $k is not an extern \"C\" __global__ __aicore__ kernel of this file with a launcher\n";
            exit 1;
        }
        "(void)($l2), aclrtlaunch_$k($b, $st" . ($empty ? ")" : ", ")
    }ge;
    $out .= "$kept\n";
}
print $out;
