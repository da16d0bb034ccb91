"""One alignment matrix read both ways (model.alignments.symmetrisation.matrix_links), on hand-made matrices."""
from model.alignments.symmetrisation import matrix_links


def test_a_far_row_maximum_gives_way_to_the_column_maximum():
    # rows = target words, columns = source words. Row maxima: (0,0) (1,1) (2,2) and (0,3): target 3
    # prefers source 0. Column maxima: (0,0) (1,1) (2,2) and (3,3): source 3 prefers target 3. They
    # agree on the diagonal; grow-diag adds (3,3) next to (2,2) (source 3 unaligned); (0,3) touches no
    # aligned point and both its words are aligned by then, so FINAL-AND leaves it out.
    weights = [[0.9, 0.0, 0.0, 0.1], [0.0, 0.9, 0.0, 0.1], [0.0, 0.0, 0.9, 0.1], [0.6, 0.0, 0.0, 0.4]]
    assert matrix_links(weights) == {(0, 0), (1, 1), (2, 2), (3, 3)}


def test_grow_links_a_second_target_word_to_a_shared_source_word():
    # Row maxima (0,0) (0,1); column maxima (0,0) (1,1). From (0,0) grow-diag adds (0,1) (target 1 is
    # unaligned), then (1,1) (source 1 is unaligned).
    assert matrix_links([[0.9, 0.1], [0.6, 0.4]]) == {(0, 0), (0, 1), (1, 1)}


def test_rows_without_mass_give_no_links_and_ties_go_to_the_lower_index():
    # Target 1 has no mass: no link. Target 0's tie goes to source 0; source 1's column links it to target 0.
    assert matrix_links([[0.5, 0.5], [0.0, 0.0]]) == {(0, 0), (1, 0)}
    assert matrix_links([]) == set()
