! SPDX-License-Identifier: BSD-3-Clause
! Process topologies created from Fortran with reorder .true. (Veneer places
! the ranks on the pretend nodes of VENEER_RANKS_PER_NODE=1,2,1): a 2x2
! Cartesian grid, a weighted and an unweighted distributed graph (adjacent
! form) and a general graph. On each new communicator the process with new
! rank k must see vertex k's coordinates and neighbour lists, and a typed
! exchange with a grid neighbour must deliver its data. 4 ranks.
program topology_test
  implicit none
  include 'mpif.h'
  integer :: rank, nranks, ierr, cart, graph, k, i, other, vec, kind
  integer :: dims(2), coords(2), below, above
  logical :: periods(2)
  integer :: sources(2), destinations(2), sweights(2), dweights(2)
  integer :: indegree, outdegree, got_s(2), got_d(2), got_sw(2), got_dw(2)
  integer :: index(4), edges(4), nneighbours, neighbours(2)
  logical :: weighted
  double precision :: sbuf(64), rbuf(64)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  call check(nranks == 4, 'needs 4 ranks')

  ! A 2x2 open grid: new rank k sits at row-major coordinates of k.
  dims = (/ 2, 2 /)
  periods = (/ .false., .false. /)
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .true., cart, ierr)
  call check(ierr == MPI_SUCCESS, 'cart_create')
  call MPI_Comm_rank(cart, k, ierr)
  call MPI_Cart_coords(cart, k, 2, coords, ierr)
  call check(coords(1) == k / 2 .and. coords(2) == mod(k, 2), 'cart_coords')
  call MPI_Cart_shift(cart, 1, 1, below, above, ierr)
  if (coords(2) == 0) then
    call check(below == MPI_PROC_NULL .and. above == k + 1, 'cart_shift')
  else
    call check(below == k - 1 .and. above == MPI_PROC_NULL, 'cart_shift')
  end if
  ! Every other double to the neighbour along the second dimension, typed.
  call MPI_Type_vector(32, 1, 2, MPI_DOUBLE_PRECISION, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  other = k + 1 - 2 * mod(k, 2)
  do i = 1, 64
    sbuf(i) = 1000 * k + i
  end do
  rbuf = -1d0
  if (mod(k, 2) == 0) then
    call MPI_Send(sbuf, 1, vec, other, 5, cart, ierr)
    call MPI_Recv(rbuf, 1, vec, other, 5, cart, MPI_STATUS_IGNORE, ierr)
  else
    call MPI_Recv(rbuf, 1, vec, other, 5, cart, MPI_STATUS_IGNORE, ierr)
    call MPI_Send(sbuf, 1, vec, other, 5, cart, ierr)
  end if
  do i = 1, 64, 2
    call check(rbuf(i) == 1000 * other + i .and. rbuf(i + 1) == -1d0, 'exchange on the grid')
  end do
  call MPI_Type_free(vec, ierr)
  call MPI_Comm_free(cart, ierr)

  ! Distributed graph: vertex v sends to v+2 and v+1, receives from v-2 and v-1, heavy along +-2.
  do kind = 0, 1
    call lists(rank, sources, sweights, destinations, dweights)
    if (kind == 1) then
      call MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, sources, sweights, 2, destinations, dweights, &
                                          MPI_INFO_NULL, .true., graph, ierr)
    else
      call MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, sources, MPI_UNWEIGHTED, 2, destinations, &
                                          MPI_UNWEIGHTED, MPI_INFO_NULL, .true., graph, ierr)
    end if
    call check(ierr == MPI_SUCCESS, 'dist_graph_create_adjacent')
    call MPI_Comm_rank(graph, k, ierr)
    call MPI_Dist_graph_neighbors_count(graph, indegree, outdegree, weighted, ierr)
    call check(indegree == 2 .and. outdegree == 2 .and. (weighted .eqv. kind == 1), 'neighbors_count')
    call MPI_Dist_graph_neighbors(graph, 2, got_s, got_sw, 2, got_d, got_dw, ierr)
    call lists(k, sources, sweights, destinations, dweights)
    call check(all(got_s == sources) .and. all(got_d == destinations), 'neighbour lists of vertex k')
    if (kind == 1) call check(all(got_sw == sweights) .and. all(got_dw == dweights), 'weights of vertex k')
    call MPI_Comm_free(graph, ierr)
  end do

  ! General graph: 0-2 and 1-3.
  index = (/ 1, 2, 3, 4 /)
  edges = (/ 2, 3, 0, 1 /)
  call MPI_Graph_create(MPI_COMM_WORLD, 4, index, edges, .true., graph, ierr)
  call check(ierr == MPI_SUCCESS, 'graph_create')
  call MPI_Comm_rank(graph, k, ierr)
  call MPI_Graph_neighbors_count(graph, k, nneighbours, ierr)
  call check(nneighbours == 1, 'graph_neighbors_count')
  call MPI_Graph_neighbors(graph, k, 2, neighbours, ierr)
  call check(neighbours(1) == mod(k + 2, 4), 'graph_neighbors')
  call MPI_Comm_free(graph, ierr)

  if (rank == 0) print '(a)', 'topology_test: ok'
  call MPI_Finalize(ierr)

contains

  subroutine lists(v, s, sw, d, dw)
    integer, intent(in) :: v
    integer, intent(out) :: s(2), sw(2), d(2), dw(2)
    d = (/ mod(v + 2, 4), mod(v + 1, 4) /)
    dw = (/ 1000 + v, 1 + v /)
    s = (/ mod(v + 2, 4), mod(v + 3, 4) /)
    sw = (/ 1000 + v, 1 + v /)
  end subroutine lists

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      print '(a, i0, 2a)', 'topology_test: rank ', rank, ': FAILED ', what
      call MPI_Abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine check

end program topology_test
