#!/usr/bin/env perl
# Runs `ljperf plan --json` on every row of rows.tsv and prints predicted against published
# tokens/s/GPU with the error, fit and validation apart, then each split's median and worst, then
# the recompute ranking check. With --max-validation-median X (a fraction), exits 1 when the
# validation median exceeds X. Perl with core modules only (JSON::PP): the tests run it where no
# Python is installed. fit.py (tools only) computes the same errors from its own copy of the model.
# Usage: check.pl path/to/ljperf [--max-validation-median X] [--markdown]
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;
use Getopt::Long qw(GetOptionsFromArray);
use JSON::PP qw(decode_json);
use List::Util qw(max);

my $here = File::Spec->rel2abs(dirname(__FILE__));

sub read_rows {
  my $path = "$here/rows.tsv";
  open(my $f, '<', $path) or die "error: cannot read $path: $!\n";
  my (@header, @rows);
  while (my $line = <$f>) {
    next if $line =~ /^#/;
    chomp $line;
    my @cells = split /\t/, $line, -1;
    if (!@header) { @header = @cells; next; }
    my %r;
    @r{@header} = @cells;
    push @rows, \%r;
  }
  return @rows;
}

# The `ljperf plan` arguments that plan the row's run (rows.py plan_args, which fit.py uses).
sub plan_args {
  my ($r) = @_;
  my $model = $r->{model};
  $model = "$here/models/$model.json" unless $model =~ /^llama3/;
  my @a = ('plan', '--json', '--model', $model, '--device', $r->{device}, '--np', $r->{gpus},
           '--zero', $r->{zero}, '--batch-size', $r->{micro_batch}, '--seq-len', $r->{seq_len},
           '--recompute', $r->{recompute}, '--memory-limit', '100TiB');
  push @a, '--recompute-layers', $r->{recompute_layers} if $r->{recompute} ne 'none';
  push @a, '--compile' if $r->{compile} eq 'yes';
  push @a, '--fabric-gbps', $r->{fabric_gbps} if $r->{gpus} > 8 && $r->{fabric_gbps} > 0;
  return @a;
}

# The plan's candidate with the row's recompute policy and layer count.
sub plan_row {
  my ($ljperf, $r) = @_;
  my @cmd = ($ljperf, plan_args($r));
  open(my $p, '-|', @cmd) or die "error: cannot run $ljperf: $!\n";
  my $out = do { local $/; <$p> };
  close($p) or die "error: `@cmd` failed (exit " . ($? >> 8) . ")\n";
  my $j = decode_json($out);
  my $layers = $r->{recompute} eq 'none' ? 0 : $r->{recompute_layers};
  for my $c (@{ $j->{candidates} }) {
    return $c if $c->{policy} eq $r->{recompute} && $c->{layers} == $layers;
  }
  die "error: no candidate for $r->{id} in the plan\n";
}

sub median {
  my @s = sort { $a <=> $b } @_;
  my $n = @s;
  return $n % 2 ? $s[($n - 1) / 2] : ($s[$n / 2 - 1] + $s[$n / 2]) / 2;
}

sub commas {
  my $s = sprintf('%.0f', $_[0]);
  1 while $s =~ s/^(-?\d+)(\d{3})/$1,$2/;
  return $s;
}

# Published runs that differ only in activation checkpointing (same source, model, GPUs, batch,
# sequence, compile): does the planner order each pair of settings as published?
sub ranking {
  my ($rows, $results) = @_;
  my (@keys, %groups);
  for my $r (@$rows) {
    my $key = join('|', @$r{qw(source model device gpus micro_batch seq_len compile)});
    push @keys, $key unless $groups{$key};
    push @{ $groups{$key} }, $r;
  }
  my ($agree, $total) = (0, 0);
  print "recompute ranking (runs that vary activation checkpointing alone):\n";
  for my $key (@keys) {
    my @g = @{ $groups{$key} };
    my %settings = map { ("$_->{recompute}/$_->{recompute_layers}" => 1) } @g;
    next if keys(%settings) < 2;
    my @idx = sort { $g[$b]{tps_published} <=> $g[$a]{tps_published} || $a <=> $b } 0 .. $#g;
    my @order = @g[@idx];
    print '  ', join(' > ', map {
      sprintf('%s (%.0f; predicted %.0f)', $_->{ac_published}, $_->{tps_published},
              $results->{ $_->{id} }{tokens_per_s})
    } @order), "  [$order[0]{source}, $order[0]{model}]\n";
    for my $i (0 .. $#order) {
      for my $k ($i + 1 .. $#order) {
        my ($x, $y) = ($order[$i], $order[$k]);
        next if $x->{recompute} eq $y->{recompute} && $x->{recompute_layers} eq $y->{recompute_layers};
        ++$total;
        if ($results->{ $x->{id} }{tokens_per_s} > $results->{ $y->{id} }{tokens_per_s}) {
          ++$agree;
        } else {
          printf "    out of order: %s above %s as published (by %.1f%%)\n", $x->{id}, $y->{id},
            100 * ($x->{tps_published} / $y->{tps_published} - 1);
        }
      }
    }
  }
  print "recompute ranking: $agree of $total pairs in the published order\n";
}

sub main {
  my @argv = @_;
  my ($bound, $markdown);
  GetOptionsFromArray(\@argv, 'max-validation-median=f' => \$bound, 'markdown' => \$markdown)
    or die "error: bad arguments\nhint: check.pl path/to/ljperf [--max-validation-median X] [--markdown]\n";
  my $ljperf = shift @argv
    or die "error: no ljperf given\nhint: check.pl path/to/ljperf [--max-validation-median X]\n";
  my @rows = read_rows();
  my %results = map { ($_->{id} => plan_row($ljperf, $_)) } @rows;
  my %medians;
  for my $split ('fit', 'validation') {
    my @errs;
    if ($markdown) {
      print "\n| $split row | published tokens/s/GPU | predicted | error | predicted MFU |\n";
      print "|---|---:|---:|---:|---:|\n";
    } else {
      print "$split:\n";
    }
    for my $r (grep { $_->{split} eq $split } @rows) {
      my $c = $results{ $r->{id} };
      my $pub = $r->{tps_published};
      my $e = $c->{tokens_per_s} / $pub - 1;
      push @errs, abs($e);
      if ($markdown) {
        printf "| %s | %s | %s | %+.1f%% | %.1f%% |\n", $r->{id}, commas($pub),
          commas($c->{tokens_per_s}), 100 * $e, 100 * $c->{mfu};
      } else {
        printf "  %-32s published %7.0f  predicted %7.0f  %+6.1f%%  (step %.3f s, MFU %.1f%%)\n",
          $r->{id}, $pub, $c->{tokens_per_s}, 100 * $e, $c->{step_seconds}, 100 * $c->{mfu};
      }
    }
    $medians{$split} = median(@errs);
    printf "%s: %d rows, median |error| %.1f%%, worst %.1f%%\n", $split, scalar(@errs),
      100 * $medians{$split}, 100 * max(@errs);
  }
  ranking(\@rows, \%results);
  if (defined $bound && $medians{validation} > $bound + 1e-9) {
    printf STDERR "FAIL: validation median %.1f%% is above %.1f%%\n", 100 * $medians{validation},
      100 * $bound;
    return 1;
  }
  return 0;
}

exit main(@ARGV);
